"""Waking an inference component that has no copy in service: the one loop `invoke` and `bench` use.

SageMaker refuses a request to a component with no copy in service at once (its no-capacity ValidationError,
`failures.NoCapacity`). With `--scale-to-zero` that refusal is what wakes it: it counts in the component's
`NoCapacityInvocationFailures`, whose alarm runs peagle's wake-up policy (the copies set back), and managed
instance scaling starts an instance; the model then loads (minutes, docs/hosting.md "Waking up"). `until_served`
says once what it is doing and why, sends the request again with back-off (a refusal at least every
BACKOFF_CAP_S: every minute of the wake-up alarm's window sees one, and the idle rule sees the component in use)
until a copy answers, and measures the cold start: from sending the first refused request to the answer. At
`--wait-timeout` it stops with one line naming the component's state and what bills meanwhile (exit 5). Interrupted
(Ctrl-C, SIGTERM) once a request was refused, it says that the wake-up goes on without it, that the copy it brings
up bills until the idle rule takes it back to zero, and the command that stops that now (exit 130).

Time is `peagle_deploy.clock`'s (looked up when called), so tests drive it with the emulator's manual clock.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any, TypeVar

from pydantic import BaseModel, Field

from ..errors import Interrupted, WaitTimeout
from .failures import NoCapacity
from .target_ref import TargetRef

T = TypeVar("T")
DEFAULT_WAIT = "15m"  # AWS: "several minutes"; a public guide measured 9 min 24 s to the first answer on an ml.g5
BACKOFF_FIRST_S, BACKOFF_FACTOR, BACKOFF_CAP_S = 5.0, 1.5, 30.0
SOURCE = "peagle's clock: from sending the first request refused for want of a copy to the first answer"


class ColdStart(BaseModel):
    """What reaching a copy of an inference component took: none when one was serving (`woken` false)."""

    inference_component: str
    woken: bool = Field(description="a request was refused for want of a copy first")
    seconds: float | None = Field(None, description="from sending the first refused request to the first answer")
    refused: int = Field(0, description="requests SageMaker refused for want of a copy meanwhile")
    source: str = SOURCE

    def describe(self) -> str:
        from ..output import human_duration

        if not self.woken:
            return "none (a copy was serving)"
        requests = f"{self.refused} request{'s' if self.refused != 1 else ''}"
        return f"{human_duration(self.seconds)} ({requests} refused while it woke; {self.source})"


def backoff() -> Iterator[float]:
    """The waits between requests to a component waking up: 5 s growing to 30 s, or PEAGLE_POLL_INTERVAL_S when it
    is set, as for every other poll of peagle's (clock.py; 0 against the emulator in CI, docs/ci.md)."""
    from ..clock import poll_intervals

    return poll_intervals(first=BACKOFF_FIRST_S, factor=BACKOFF_FACTOR, cap=BACKOFF_CAP_S)


def until_served(attempt: Callable[[], T], ref: TargetRef, *, wait_timeout_s: float, out: Any,
                 state: Callable[[], str] | None = None, region: str | None = None) -> tuple[T, ColdStart]:
    """`attempt()` (one request) until it is not refused for want of a copy; its answer and the cold start.
    `out`: the command's Output (one line when waking starts and ends, progress meanwhile); `state()`: the
    component's state and what bills, read for the timeout's line; `region`: the endpoint's (for the command an
    interruption names)."""
    try:
        return _until_served(attempt, ref, wait_timeout_s=wait_timeout_s, out=out, state=state)
    except _InterruptedWaking as stopped:
        raise interrupted_waking(ref, stopped.signal, region) from None


class _InterruptedWaking(Exception):
    """A signal after a request was refused: the wake-up it started goes on."""

    def __init__(self, signal: KeyboardInterrupt):
        super().__init__(str(signal))
        self.signal = signal


def interrupted_waking(ref: TargetRef, signal: KeyboardInterrupt, region: str | None = None) -> Interrupted:
    """The one line of a wake-up interrupted after its first refused request: the alarm that request raised still
    sets the copies back, and the copy bills until the idle rule takes it back to zero; removing the endpoint is
    what stops it now (a copy count set to 0 by hand may be set back by the wake-up policy while its alarm fires)."""
    by = f" by {signal.name}" if hasattr(signal, "name") else ""
    where = f" --region {region}" if region else ""
    return Interrupted(f"interrupted{by} while waking {ref.described}: the wake-up its refused request started goes on "
                       "without peagle: a copy starts, and its instance bills by the hour until the idle rule takes "
                       "it back to zero",
                       f"to stop it now, remove the endpoint: 'peagle cleanup {ref.name}{where} --yes' (one peagle "
                       "made; another tool's, as it was made)")


def _until_served(attempt: Callable[[], T], ref: TargetRef, *, wait_timeout_s: float, out: Any,
                  state: Callable[[], str] | None = None) -> tuple[T, ColdStart]:
    from .. import clock
    from ..output import human_duration

    component = ref.inference_component or ref.name
    first: float | None = None
    refused = 0
    delays = backoff()
    with ExitStack() as stack:
        show: Callable[[float, int], None] = lambda _elapsed, _refused: None  # noqa: E731
        while True:
            sent = clock.monotonic()
            try:
                answer = attempt()
            except KeyboardInterrupt as signal:
                if first is None:  # nothing was refused yet: nothing woke
                    raise
                raise _InterruptedWaking(signal) from None
            except NoCapacity:
                refused += 1
                if first is None:
                    first = sent
                    out.info(f"waking {ref.described}: it has no copy in service (scaled to zero), and the refused "
                             "request counts in its NoCapacityInvocationFailures, whose wake-up alarm sets the copies "
                             "back (minutes: an instance starts and the model loads); asking again until a copy "
                             f"answers, for at most --wait-timeout {human_duration(wait_timeout_s)}")
                    show = stack.enter_context(_progress(out, component))
                elapsed = clock.monotonic() - first
                if elapsed >= wait_timeout_s:
                    now = state() if state is not None else "its state was not read"
                    raise WaitTimeout(f"{ref.described} has no copy in service after {human_duration(elapsed)} "
                                      f"(--wait-timeout {human_duration(wait_timeout_s)}); now: {now}",
                                      "a wake-up its alarm started goes on without peagle (peagle status shows the "
                                      "alarm of a peagle deploy): run the command again later, or raise "
                                      "--wait-timeout") \
                        from None
                show(elapsed, refused)
                try:
                    clock.sleep(max(0.0, min(next(delays), wait_timeout_s - elapsed)))
                except KeyboardInterrupt as signal:
                    raise _InterruptedWaking(signal) from None
                continue
            break
    if first is None:
        return answer, ColdStart(inference_component=component, woken=False)
    seconds = clock.monotonic() - first
    out.info(f"{ref.described} is serving: a copy answered {human_duration(seconds)} after the first refused request")
    return answer, ColdStart(inference_component=component, woken=True, seconds=round(seconds, 3), refused=refused)


@contextmanager
def _progress(out: Any, component: str) -> Iterator[Callable[[float, int], None]]:
    """On a terminal a spinner with the time elapsed, live (Rich, on stderr); elsewhere a plain line when the count
    of refusals changes shape and every 30 s (`PlainProgress`, as `Output.status`)."""
    from .. import clock
    from ..output import PlainProgress, human_duration

    def refusals(refused: int) -> str:
        return f"{refused} request{'s' if refused != 1 else ''} refused"

    if not out.interactive:
        plain = PlainProgress(out.info, clock=clock.monotonic)
        yield lambda elapsed, refused: plain(f"waking {component}: {human_duration(elapsed)} elapsed, "
                                             f"{refusals(refused)}")
        return
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    with Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), console=out.err_console,
                  transient=True, get_time=clock.monotonic) as progress:
        task = progress.add_task(f"waking {component}: {refusals(1)}")
        yield lambda _elapsed, refused: progress.update(task, description=f"waking {component}: {refusals(refused)}")


def component_state(session: Any, ref: TargetRef) -> str:
    """'InService, 0/1 copies, 0 instances in service (1 starting): nothing bills (no instance in service)', read
    now (DescribeInferenceComponent and DescribeEndpoint); a read that fails says so instead."""
    from ..aws import translate_error

    try:
        sm = session.client("sagemaker")
        component = sm.describe_inference_component(InferenceComponentName=ref.inference_component)
        endpoint = sm.describe_endpoint(EndpointName=ref.name)
    except Exception as exc:  # noqa: BLE001 - the state is shown, never a failure of its own
        error = translate_error(exc)
        if error is None:
            raise
        return f"its state could not be read ({error.one_line()})"
    runtime = component.get("RuntimeConfig") or {}
    variant = next(iter(endpoint.get("ProductionVariants") or []), {})
    instances, desired = variant.get("CurrentInstanceCount"), variant.get("DesiredInstanceCount")
    copies = f"{runtime.get('CurrentCopyCount', '?')}/{runtime.get('DesiredCopyCount', '?')} copies"
    starting = f" ({desired - instances} starting)" if isinstance(desired, int) and isinstance(instances, int) \
        and desired > instances else ""
    if instances == 0:
        bills = "nothing bills (no instance in service)"
    elif instances is None:
        bills = "its instances are unknown"
    else:
        bills = (f"{instances} instance{'s bill' if instances != 1 else ' bills'} by the hour until the idle rule "
                 f"takes it back to zero (peagle cleanup {ref.name} removes it all)")
    return (f"{component.get('InferenceComponentStatus', 'unknown')}, {copies}, "
            f"{'?' if instances is None else instances} instance{'s' if instances != 1 else ''} in service"
            f"{starting}: {bills}")
