"""The one table of number bounds (peagle_deploy/numbers.py): every numeric option of every command has a bound
in it, every bound's example lies inside it, and the shared check refuses what the table refuses."""

from __future__ import annotations

import math

import pytest

from peagle_deploy.errors import UsageError
from peagle_deploy.numbers import BOUNDS, check, check_params


def _commands():
    """(command path, click command) for every runnable command, subcommands of groups included."""
    import typer.main

    from peagle_deploy.cli.app import app

    root = typer.main.get_command(app)
    stack = [((), root)]
    while stack:
        path, command = stack.pop()
        subcommands = getattr(command, "commands", None)
        if subcommands:
            stack.extend(((*path, name), sub) for name, sub in subcommands.items())
        else:
            yield " ".join(path), command


def _numeric(param) -> bool:
    """An option typed int or float (also `int | None`, `list[float]`), never a flag (bool)."""
    import typing

    todo, seen = [param.type_descriptor.annotation], set()
    while todo:
        kind = todo.pop()
        if kind in (int, float):
            return True
        todo.extend(a for a in typing.get_args(kind) if a not in seen)
        seen.update(typing.get_args(kind))
    return False


def test_every_numeric_option_of_every_command_has_a_bound():
    unbound = sorted({f"peagle {path} {max(p.opts, key=len)}" for path, command in _commands()
                      for p in command.params if p.opts and _numeric(p) and max(p.opts, key=len) not in BOUNDS})
    assert not unbound, f"numeric options without a bound in peagle_deploy/numbers.py BOUNDS: {unbound}"
    assert sum(1 for _, c in _commands() for p in c.params if p.opts and _numeric(p)) >= 20  # the walk found them


@pytest.mark.parametrize("flag", sorted(BOUNDS))
def test_each_bounds_example_is_inside_it_and_its_edges_are_refused(flag):
    bound = BOUNDS[flag]
    assert bound.holds(float(bound.example)), f"{flag}: the hint's example {bound.example} is refused"
    for value in (math.inf, -math.inf, math.nan, bound.high * 2 + 1):
        with pytest.raises(UsageError) as refused:
            check(flag, value)
        assert f"pass e.g. {flag} {bound.example}" in refused.value.one_line()
    if bound.low_open:
        with pytest.raises(UsageError):
            check(flag, bound.low)
    else:
        assert check(flag, bound.low) == bound.low


def test_an_option_without_a_bound_still_refuses_inf_and_nan():
    check_params({"made_up": 5.0}, {"made_up": "--made-up"})  # finite: left to its command
    for value in (math.inf, math.nan):
        with pytest.raises(UsageError, match="--made-up must be a finite number"):
            check_params({"made_up": value}, {"made_up": "--made-up"})
