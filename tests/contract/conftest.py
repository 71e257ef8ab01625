"""The two accounts the contract scenarios run against (account.py): the emulator (module-scoped, the fast suite)
and a real one (session-scoped, `pytest -m aws`). Both end with the tier's sweep (cleanup.py): everything of their
name prefix removed by peagle's own cleanup, whatever happened."""

from __future__ import annotations

import os
import sys
from datetime import UTC, datetime

import pytest

from .account import (ZERO_QUOTA_CANDIDATES, Account, AwsSettings, EmulatedClock, RealClock, new_prefix)
from .cleanup import sweep
from .plugin import REPORT, SETTINGS

EMULATED_INSTANCE_TYPE = "ml.m5.large"
EMULATED_ZERO_QUOTA_TYPE = ZERO_QUOTA_CANDIDATES[0]


def emulated_account(emu, monkeypatch: pytest.MonkeyPatch) -> Account:
    """An Account on the emulator server `emu` (emptied): peagle's session through the emulator's environment, its
    waits on the emulator's ManualClock (a fresh one at each run: every run starts at the real time, as a token's
    signature does), the times and scripted polls of a real account in small (an endpoint Creating for 2 describes,
    an instance 2 minutes to start, a copy 1 minute), and the container's start-up lines written to a component's
    log group when it comes into service (the emulator runs no component container)."""
    from peagle_deploy import clock as peagle_clock
    from peagle_deploy.aws import AwsSession
    from peagle_deploy.testing.component_emulation import ManualClock
    from peagle_deploy.testing.vllm_stand_in import startup_lines

    for key in [k for k in os.environ if k.startswith("AWS_")]:
        monkeypatch.delenv(key)
    for key, value in emu.env.items():
        if key.startswith("AWS_"):
            monkeypatch.setenv(key, value)
    emu.clock = ManualClock()
    monkeypatch.setattr(peagle_clock, "now", lambda: datetime.fromtimestamp(emu.clock(), UTC))
    monkeypatch.setattr(peagle_clock, "sleep", lambda seconds: emu.clock.advance(seconds))
    monkeypatch.setattr(peagle_clock, "monotonic", lambda: emu.clock())
    emu.script_endpoints(creating_polls=2)
    emu.script_update(updating_polls=2)
    emu.components.script(creating_polls=2, updating_polls=2)
    emu.components.scaling(instance_start_s=120, copy_start_s=60)
    emu.set_quota(EMULATED_ZERO_QUOTA_TYPE, 0)

    def container_output(endpoint: str, component: str, model_label: str) -> None:
        emu.put_log_lines(endpoint, startup_lines(model_label, 8080), component=component,
                          stream=f"{component}/i-0emulated", start_ms=int(emu.clock() * 1000))

    def fresh_clock() -> None:
        emu.clock = ManualClock()

    return Account(kind="emulator", session=AwsSession(emu.region), role_arn=emu.role_arn,
                   image=f"123456789012.dkr.ecr.{emu.region}.amazonaws.com/peagle-contract:emulated",
                   instance_type=EMULATED_INSTANCE_TYPE, prefix=new_prefix(), clock=EmulatedClock(lambda: emu.clock),
                   zero_quota_types=ZERO_QUOTA_CANDIDATES, container_output=container_output,
                   start_run=fresh_clock, emu=emu)


@pytest.fixture(scope="module")
def emulator_account(emulator_server):
    """The contract scenarios' emulated account for a test module (its runs are shared by the module's tests)."""
    from ..conftest import emptied

    emu = emptied(emulator_server)
    with pytest.MonkeyPatch.context() as monkeypatch:
        account = emulated_account(emu, monkeypatch)
        try:
            yield account
        finally:
            sweep(account)
            emu.release_gates()


@pytest.fixture(scope="session")
def aws_account(request):
    """The real account of `pytest -m aws`: AWS's credential chain, PEAGLE_AWS_* settings (plugin.py checked them),
    real waits. Its finalizer sweeps the session's prefix with peagle's cleanup even when tests failed, and prints the
    exact command for anything that could not be removed."""
    from peagle_deploy.aws import AwsSession

    settings = request.config.stash.get(SETTINGS, None) or AwsSettings.from_env()
    account = Account(kind="aws", session=AwsSession(settings.region), role_arn=settings.role_arn or "",
                      image=settings.image or "", instance_type=settings.instance_type, prefix=settings.prefix,
                      clock=RealClock(),
                      zero_quota_types=(settings.zero_quota_type,) if settings.zero_quota_type
                      else ZERO_QUOTA_CANDIDATES)
    try:
        yield account
    finally:
        request.config.stash[REPORT] = _final_sweep(account)


def _final_sweep(account: Account, stream=None) -> list[str]:
    """Sweep, and what to say: removed, or each leftover with its command (written at once to `stream`, default the
    process's own stderr, which pytest does not capture)."""
    from peagle_deploy.pricing import instance_price

    try:
        left, failures = sweep(account)
    except Exception as exc:  # noqa: BLE001 - the sweep itself failed (credentials expired, network): say how to finish
        left, failures = None, [f"{type(exc).__name__}: {exc}"]
    hours = account.meter.instance_hours(account.now())
    spent = []
    for instance_type, used in hours.items():
        price = instance_price(instance_type, account.region).usd_per_hour_each
        spent.append(f"{used:.2f} instance-hours of {instance_type}"
                     + (f" (about ${used * price:,.2f})" if price is not None else " (price unknown)"))
    lines = [f"measured: {', '.join(spent) or 'no instance'} (from each endpoint's create to its removal, at its most "
             "instances)"]
    if left == [] and not failures:
        lines.append(f"everything named {account.prefix}* was removed by peagle's cleanup")
        if stream is not None:
            stream.write("\n".join(lines) + "\n")
        return lines
    lines += [f"peagle's cleanup failed: {why}" for why in failures]
    if left is None:
        lines.append(f"could not list what is left; remove everything named {account.prefix}* in {account.region}, "
                     f"e.g. peagle status --region {account.region}, then peagle cleanup NAME --region "
                     f"{account.region} --yes for each")
    else:
        lines.append(f"LEFT BEHIND ({len(left)}), remove with:")
        lines += [f"  {leftover.command}" for leftover in left]
    stream = stream or sys.__stderr__
    stream.write("\n".join(lines) + "\n")
    stream.flush()
    return lines
