"""How `peagle status` looks: the table, and `--watch` (redrawn on a terminal, change lines elsewhere).

The rows come from `lifecycle.inventory.status`; this module only presents them. The watch loop takes
its `sleep` and `now` from the caller so tests never wait.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from .. import interruptible
from ..errors import ExitCode, PeagleError
from ..output import Output, human_duration, human_expiry, print_table, table_view

HEADERS = ("endpoint", "status", "model", "mode", "K", "instances", "age", "expires", "cost so far")


def cells(row: Any) -> list[str]:
    unknown = getattr(row, "price", None) is not None and row.price.usd_per_hour is None
    cost = "price unknown" if unknown else "-" if row.cost_so_far_usd is None else f"${row.cost_so_far_usd:,.2f} (est.)"
    status = row.status + (f": {row.failure_reason}" if row.failure_reason else "")
    return [row.name, status, row.model or "-", row.mode or "-", "-" if row.k is None else str(row.k),
            f"{'?' if row.instance_count is None else row.instance_count} x {row.instance_type or '?'}",
            human_duration(row.age_s),
            _expiry(row), cost]


def _expiry(row: Any) -> str:
    """An expiry tag that exists but cannot be read is said so, never shown as 'never'."""
    if row.expires_in_s is None and any(p.startswith("peagle:expires-at") for p in getattr(row, "tag_problems", [])):
        return "unreadable tag"
    return human_expiry(row.expires_in_s)


def render(console: Any, rows: Sequence[Any], *, title: str = "peagle endpoints",
           unused: Sequence[Any] = (), missing: str | None = None, in_progress: Sequence[Any] = ()) -> None:
    def say(text: str) -> None:
        console.print(text, markup=False, soft_wrap=True, highlight=False)

    if not rows:
        say(f"no endpoint named {missing} in this region" if missing else "no peagle endpoints in this region")
    else:
        print_table(console, HEADERS, [cells(r) for r in rows], title=title)
        _price_lines(console, rows)
    for r in rows:
        for text in served_lines(r):
            say(f"{r.name}: {text}")
        if getattr(r, "startup_check", None) is not None:
            say(f"{r.name}: vLLM start-up {r.startup_check.line()}")
        elif getattr(r, "vllm", None) is not None:
            say(f"{r.name}: {r.vllm.summary()}")
        if getattr(r, "acceptance", None) is not None:
            say(f"{r.name}: {r.acceptance.line()}")
    leased = {(r.name, r.lease.run_id) for r in rows if getattr(r, "lease", None) is not None}
    for leftover in in_progress:  # not unused: a deploy's before its endpoint exists (an update's: said above)
        if (leftover.endpoint, leftover.lease.run_id) not in leased:
            say(f"{leftover.label} {leftover.name}: {leftover.lease.describe()}")
    for leftover in unused:
        if leftover.kind == "inference_component":
            say(f"stranded inference component {leftover.name} (its endpoint {leftover.endpoint} was deleted under "
                f"it; SageMaker keeps it): remove with '{leftover.command}'")
            continue
        made_for = f"peagle made it for {leftover.endpoint}" if leftover.endpoint else "peagle made it"
        say(f"unused {leftover.label} {leftover.name} ({made_for}; no endpoint uses it): remove with "
            f"'{leftover.command}'")


def served_lines(row: Any) -> list[str]:
    """What the endpoint serves (read from its config), an update in progress, autoscaling intended vs registered."""
    lines = []
    config = getattr(row, "endpoint_config", None)
    if config:
        where = ("read from its model's SM_VLLM_SPECULATIVE_CONFIG" if row.spec_source == "served config"
                 else f"from its tags: {row.spec_problem}" if row.spec_problem else "from its tags")
        spec = "mode off" if row.mode == "off" else f"{row.mode or '?'} K={'-' if row.k is None else row.k}"
        lines.append(f"serves {config} ({spec}, {where})")
    if getattr(row, "serving_pools", None):  # instance pools: which one SageMaker provisioned (DescribeEndpoint)
        lines.append(f"{row.serving_pools}; cost so far priced on the serving pool")
    lease = getattr(row, "lease", None)
    if lease is not None:  # whose work, since when: in progress (fresh) or abandoned
        lines.append(lease.describe())
    update = getattr(row, "update", None)
    if update is not None:
        if update.state == "updating":
            lines.append(f"update in progress: {update.from_config} -> {update.to_config} (SageMaker is on it)")
        elif update.state == "in progress":
            lines.append(f"update in progress: {update.from_config} -> {update.to_config}")
        else:
            lines.append(f"update did not finish: {update.from_config} -> {update.to_config}"
                         + ("" if lease is not None else " (stopped, or still running elsewhere)"))
    if _scaling_worth_a_line(row):
        lines.append(row.autoscaling.summary())
    component = getattr(row, "component", None)
    if component is not None:
        from ..lifecycle.components import scaling_line, summary

        lines.append(summary(component))
        unfinished = scaling_line(component)
        if unfinished:
            lines.append(unfinished)
        if component.warning:
            lines.append(component.warning)
        if component.detail:
            lines.append(f"could not read: {component.detail}")
    if getattr(row, "cost_how", None):
        lines.append(f"cost so far: {row.cost_how}")
    intended, scaling = getattr(row, "autoscaling_intended", None), row.autoscaling
    if intended and scaling is not None and scaling.state != "unknown" and not _as_intended(intended, scaling):
        lines.append(f"autoscaling intended: {intended}; registered: {scaling.summary().removeprefix('autoscaling ')}")
    command = getattr(row, "recover_command", None)
    if command:
        lines.append(f"finish with '{command}'")
    return lines


def _as_intended(intended: str, scaling: Any) -> bool:
    return scaling.state == "on" and intended.startswith(f"{scaling.min_capacity}-{scaling.max_capacity} instances")


def _price_lines(console: Any, rows: Sequence[Any]) -> None:
    """One endpoint: its price and source. Several: only why a price is unknown (once per instance type)."""
    priced = [r for r in rows if getattr(r, "price", None) is not None]
    if len(rows) == 1 and priced:
        now = ""
        if getattr(rows[0], "hosting", "endpoint") == "component" and rows[0].price_per_hour_usd is not None:
            now = (f"; now ${rows[0].price_per_hour_usd:,.2f}/h for the {rows[0].instance_count} instance"
                   f"{'' if rows[0].instance_count == 1 else 's'} running")
        console.print(f"{rows[0].name}: price {priced[0].price.describe()}{now}", markup=False, soft_wrap=True)
        return
    seen = set()
    for r in priced:
        if r.price.usd_per_hour is None and r.price.instance_type not in seen:
            seen.add(r.price.instance_type)
            console.print(f"price of {r.price.instance_type}: {r.price.describe()}", markup=False, soft_wrap=True)


def _scaling_worth_a_line(row: Any) -> bool:
    """Autoscaling that is on, or unknown where peagle registered it: 'off' is the usual case and stays quiet."""
    scaling = getattr(row, "autoscaling", None)
    return scaling is not None and scaling.worth_saying


def line(row: Any) -> str:
    """One endpoint as one plain line (for --watch off a terminal)."""
    name, status, model, mode, k, instances, age, expires, cost = cells(row)
    spec = mode if k == "-" else f"{mode} K={k}"
    scaling = f", {row.autoscaling.summary()}" if _scaling_worth_a_line(row) else ""
    return f"{name} {status} ({model} {spec}, {instances}, age {age}, expires {expires}, {cost}{scaling})"


def watch(out: Output, fetch: Callable[[], Sequence[Any]], *, interval: float,
          sleep: Callable[[float], None] = interruptible.sleep, now: Callable[[], datetime] = lambda: datetime.now(UTC),
          max_refreshes: int | None = None) -> None:
    """Show the status every `interval` seconds until Ctrl-C (which ends it normally, exit 0).

    On a terminal the table is redrawn in place. Elsewhere (a pipe, a log) a timestamped line per
    endpoint first, then a line only when an endpoint appears, changes status or goes away.
    The first read's failure is the command's failure; later read failures are reported and retried.
    """
    rows = list(fetch())
    try:
        if out.console.is_terminal:
            _watch_live(out, fetch, rows, interval=interval, sleep=sleep, now=now, max_refreshes=max_refreshes)
        else:
            _watch_lines(out, fetch, rows, interval=interval, sleep=sleep, now=now, max_refreshes=max_refreshes)
    except KeyboardInterrupt:
        return


def _stamp(now: Callable[[], datetime]) -> str:
    return now().astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _refresh(out: Output, fetch: Callable[[], Sequence[Any]], previous: list[Any], interval: float) -> list[Any]:
    try:
        return list(fetch())
    except PeagleError as exc:
        if exc.exit_code == ExitCode.USAGE:  # the one watched endpoint no longer exists
            return []
        out.warn(f"could not read the status ({exc.one_line()}); trying again in {interval:g}s")
        return previous


def _watch_lines(out, fetch, rows, *, interval, sleep, now, max_refreshes) -> None:
    def emit(text: str) -> None:
        out.console.print(f"{_stamp(now)} {text}", markup=False, highlight=False, soft_wrap=True)

    if not rows:
        emit("no peagle endpoints in this region")
    seen: dict[str, tuple[str, str | None]] = {}
    for r in rows:
        emit(line(r))
        seen[r.name] = (r.status, r.failure_reason)
    refreshes = 0
    while max_refreshes is None or refreshes < max_refreshes:
        sleep(interval)
        refreshes += 1
        rows = _refresh(out, fetch, rows, interval)
        current = {r.name: r for r in rows}
        for r in rows:
            state = (r.status, r.failure_reason)
            if seen.get(r.name) != state:
                emit(line(r))
                seen[r.name] = state
        for name in [n for n in seen if n not in current]:
            emit(f"{name} gone")
            del seen[name]


def _watch_live(out, fetch, rows, *, interval, sleep, now, max_refreshes) -> None:
    from rich.live import Live
    from rich.text import Text

    def view(current):
        if not current:
            return Text("no peagle endpoints in this region")
        return table_view(out.console.width, HEADERS, [cells(r) for r in current],
                          title=f"peagle endpoints at {_stamp(now)} (every {interval:g}s, Ctrl-C to stop)")

    with Live(view(rows), console=out.console, auto_refresh=False) as live:
        refreshes = 0
        while max_refreshes is None or refreshes < max_refreshes:
            sleep(interval)
            refreshes += 1
            rows = _refresh(out, fetch, rows, interval)
            live.update(view(rows), refresh=True)
