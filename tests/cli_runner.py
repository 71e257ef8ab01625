"""Run the real `peagle` entry point in-process, isolated, and capture exit code, stdout and stderr.

`run_cli(*args, env=None, cwd=None, stdin="")` calls `peagle_deploy.cli.app.main` in this process, the
way the console script would, inside `isolated()`: while it runs it has

- its own environment (`env`: exactly that, e.g. `emu.env`; None: a copy of this process's) and working
  directory, both put back afterwards;
- its own stdin (a string, not a terminal; `terminal=True`: a terminal at which the user types that string),
  stdout and stderr (captured, not terminals);
- this process's signal handlers saved and put back (deploy/update install their own);
- peagle's module state put back: every module-level set, dict and list of `peagle_deploy.*` (the
  registered secrets, for one), and its `functools.cache`s cleared, as a new process would start;
- `tempfile.tempdir` and boto3's default session as a new process has them;
- a fake clock for the waits between AWS polls (`FakeClock`, `peagle_deploy.clock`): a
  poll that a real run would wait 2 s for happens at once (`fake_clock=False` keeps real time).

It must run in the main thread (signal handlers). Threads that the command leaves behind are not
isolated; nothing in peagle does that. For a run in its own process, use the fork server
(tests/forked_peagle.py); tests/README.md says which to use when.
"""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field


@dataclass
class CliResult:
    code: int
    stdout: str
    stderr: str


class TerminalInput(io.StringIO):
    """Stdin that is a terminal holding what the user types (a prompt reads it; `isatty()` is true)."""

    def isatty(self) -> bool:
        return True


@dataclass
class FakeClock:
    """A monotonic clock that only moves when something sleeps on it; `sleeps` lists what was asked."""

    now: float = 1000.0
    sleeps: list[float] = field(default_factory=list)

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += max(0.0, seconds)


@contextmanager
def fake_wait_clock(clock: FakeClock | None = None) -> Iterator[FakeClock]:
    """The CLI's polls and read retries (`peagle_deploy.clock.sleep/monotonic`) on a fake clock."""
    from peagle_deploy import clock as peagle_clock

    clock = clock or FakeClock()
    saved = peagle_clock.sleep, peagle_clock.monotonic
    peagle_clock.sleep, peagle_clock.monotonic = clock.sleep, clock.monotonic
    try:
        yield clock
    finally:
        peagle_clock.sleep, peagle_clock.monotonic = saved


_CATCHABLE = [s for s in signal.valid_signals() if s not in (signal.SIGKILL, signal.SIGSTOP)]


def _module_state() -> list[tuple[object, object]]:
    """(container, shallow copy) for every module-level set, dict and list of peagle_deploy. Not the module's own
    dunders: `__builtins__` is the interpreter's builtins dict, which restoring would empty for a moment under every
    other thread (an emulator's request thread then finds no `super`), and `__all__`/`__path__` are not state."""
    saved = []
    for name, module in list(sys.modules.items()):
        if not (name == "peagle_deploy" or name.startswith("peagle_deploy.")) or module is None:
            continue
        for key, value in vars(module).items():
            if type(value) in (set, dict, list) and not key.startswith("__"):
                saved.append((value, value.copy()))
    return saved


def _restore_module_state(saved: list[tuple[object, object]]) -> None:
    for container, copy in saved:
        if isinstance(container, list):
            container[:] = copy
        else:
            container.clear()
            container.update(copy)
    for name, module in list(sys.modules.items()):
        # the emulator's caches (peagle_deploy.testing: AWS's side, which outlives a run) hold data, not a run's state
        if (name == "peagle_deploy" or name.startswith("peagle_deploy.")) and module is not None \
                and not name.startswith("peagle_deploy.testing"):
            for value in list(vars(module).values()):
                if callable(getattr(value, "cache_clear", None)) and getattr(value, "__module__", "") == name:
                    value.cache_clear()


@contextmanager
def isolated(env: dict[str, str] | None = None, cwd: str | os.PathLike | None = None, stdin: str = "",
             fake_clock: bool = True, terminal: bool = False) -> Iterator[tuple[io.StringIO, io.StringIO]]:
    """This process as a fresh `peagle` process would see it, and back afterwards (see the module docstring)."""
    import boto3

    saved_env, saved_cwd = dict(os.environ), os.getcwd()
    saved_handlers = {s: signal.getsignal(s) for s in _CATCHABLE}
    saved_streams = sys.stdin, sys.stdout, sys.stderr
    saved_state = _module_state()
    saved_tempdir, saved_session = tempfile.tempdir, boto3.DEFAULT_SESSION
    out, err = io.StringIO(), io.StringIO()
    try:
        if env is not None:
            os.environ.clear()
            os.environ.update(env)
        if cwd is not None:
            os.chdir(cwd)
        tempfile.tempdir, boto3.DEFAULT_SESSION = None, None
        sys.stdin, sys.stdout, sys.stderr = (TerminalInput if terminal else io.StringIO)(stdin), out, err
        if fake_clock:
            with fake_wait_clock():
                yield out, err
        else:
            yield out, err
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved_streams
        for signum, handler in saved_handlers.items():
            if handler is not None:
                signal.signal(signum, handler)
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
        tempfile.tempdir, boto3.DEFAULT_SESSION = saved_tempdir, saved_session
        _restore_module_state(saved_state)


def run_cli(*args: str, env: dict[str, str] | None = None, cwd: str | os.PathLike | None = None, stdin: str = "",
            fake_clock: bool = True, terminal: bool = False) -> CliResult:
    """`peagle ARGS...` in this process (isolated, see the module docstring)."""
    from peagle_deploy.cli.app import main

    code = 0
    with isolated(env, cwd, stdin, fake_clock, terminal) as (out, err):
        try:
            main(list(args))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return CliResult(code, out.getvalue(), err.getvalue())


def run_cli_completed(*args: str, env: dict[str, str] | None = None, cwd: str | os.PathLike | None = None,
                      stdin: str = "", fake_clock: bool = True) -> subprocess.CompletedProcess:
    """`run_cli` with `subprocess.run`'s result shape (returncode, stdout, stderr): a drop-in where a test
    ran the executable only for its result."""
    result = run_cli(*args, env=env, cwd=cwd, stdin=stdin, fake_clock=fake_clock)
    return subprocess.CompletedProcess(["peagle", *args], result.code, result.stdout, result.stderr)
