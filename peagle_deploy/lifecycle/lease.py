"""Leases: which peagle is working on a resource right now, readable by every peagle on every machine.

Each operation that writes (deploy, update, cleanup, sweep) puts one tag on what it works on, and keeps it fresh:

    peagle:lease = "update host=build-7 pid=4242 start=8812345 pids=5be0c1d2 id=9f3a1c2e since=2025-06-01T10:00:00Z
                    until=2025-06-01T10:10:00Z"

the operation; its owner (host name, process id, and a random id of this run: nothing secret; on Linux also when
the process started and which process table its pid belongs to, `lifecycle.lease_owner`); when it started; and
until when it counts as alive (at most about 190 characters: AWS takes 256 in a tag value). Tags are the only
store every peagle shares (`lifecycle.intent`):

- deploy: the model, endpoint config and endpoint it creates carry the lease from their create request on (a
  deploy has no endpoint before CreateEndpoint, and its config and model must not look unused meanwhile);
- update: the endpoint, written with its intent (one AddTags) and cleared with it; the new model and config are
  held through their endpoint (`peagle:endpoint`);
- cleanup: each endpoint, written with `peagle:deleting`;
- sweep: every model, config and endpoint of its configurations, from their create on (`peagle:sweep-id` says
  whose); its teardown removes them with it. When the sweep ends, however it ends but SIGKILL, the lease of
  anything left is expired at once: a sweep's endpoint never outlives its sweep, so `peagle recover` removes it.

Period and expiry: `until` is set to now + EXPIRY_S (10 minutes) when the lease is written, and again every
PERIOD_S (60 s) by a daemon thread of the owner, whatever its main thread waits on (SageMaker's minutes of
Creating or Updating). A live owner must miss nine refreshes in a row (throttling, a network blip) before its work
looks abandoned. A refresh first reads the tag: if it is gone or another run's (a `peagle recover --force` took the
work over), the owner stops refreshing it and never writes it back. The owner removes its lease when it ends (an
update's or a cleanup's failure leaves its intent for `peagle recover`, without a lease); only SIGKILL or a lost
machine leaves a lease behind, which counts as abandoned once `until` has passed; on the machine the lease names, at
once when its process is gone (or its pid is another process's now, `lifecycle.lease_owner`): the owner then
cannot be refreshing it.

A refresh that fails is said once per run, on stderr, in one line, never every 60 s: AWS's AccessDenied names the
permission missing (action and resource) and when the lease goes stale; any other failure its AWS error.

Clock: the owner writes `until` by its clock, every reader judges it by its own (`clock.now`); the 10 minutes
absorb the few seconds two machines' clocks differ by under NTP. `status` says "in progress on OWNER since ...
(lease fresh until ...)" or "abandoned (lease expired at ...)", or on the owner's machine "abandoned (its process
(pid N) is no longer running on HOST)"; `recover` leaves a fresh lease's work alone (`--force` overrides).
"""

from __future__ import annotations

import os
import re
import secrets
import sys
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import BaseModel, Field

from .. import clock
from ..errors import PeagleError
from ..tag_keys import LEASE
from . import lease_owner

PERIOD_S = 60.0
EXPIRY_S = 600.0

_VALUE = re.compile(r"^(?P<operation>[a-z]+) host=(?P<host>\S+) pid=(?P<pid>\d+)(?: start=(?P<start>\d+))?"
                    r"(?: pids=(?P<pids>[0-9a-f]+))? id=(?P<run_id>[0-9a-f]+) "
                    r"since=(?P<since>\S+) until=(?P<until>\S+)$")
_ARN_PART = {"endpoint": "endpoint", "endpoint_config": "endpoint-config", "model": "model"}  # ...:PART/NAME


class Lease(BaseModel):
    """One operation's lease, as read from (or written to) a `peagle:lease` tag."""

    operation: str = Field(description="deploy, update, cleanup or sweep")
    host: str
    pid: int
    run_id: str = Field(description="random, one per run: tells two runs of one process apart")
    start: str | None = Field(default=None, description="when the process started, in clock ticks since boot "
                                                         "(Linux): a pid reused by another process started later")
    pids: str | None = Field(default=None, description="the boot and pid namespace the pid belongs to (a hash, "
                                                        "Linux): only a reader in the same one can judge the pid")
    since: datetime
    until: datetime = Field(description="it counts as abandoned after this time")
    fresh: bool | None = Field(default=None, description="judged when read: until is still ahead, and (read on the "
                                                         "owner's machine) its process still runs it")
    gone: str | None = Field(default=None, description="judged when read on the owner's machine: why its process "
                                                        "no longer holds it (then it is abandoned at once)")

    @property
    def owner(self) -> str:
        return f"{self.host} (pid {self.pid}, run {self.run_id})"

    def to_tag(self) -> str:
        process = "".join(f" {key}={value}" for key, value in (("start", self.start), ("pids", self.pids)) if value)
        return (f"{self.operation} host={self.host} pid={self.pid}{process} id={self.run_id} "
                f"since={_stamp(self.since)} until={_stamp(self.until)}")

    def judged(self, now: datetime) -> Lease:
        gone = lease_owner.gone(self.host, self.pid, self.run_id, self.start, self.pids)
        return self.model_copy(update={"fresh": now < self.until and gone is None, "gone": gone})

    def describe(self) -> str:
        """'update in progress on HOST (pid N, run ID) since T (lease fresh until U)', or '... abandoned (why)'."""
        if self.fresh:
            return (f"{self.operation} in progress on {self.owner} since {_stamp(self.since)} (lease fresh until "
                    f"{_stamp(self.until)})")
        why = self.gone or f"lease expired at {_stamp(self.until)}"
        return f"{self.operation} on {self.owner} since {_stamp(self.since)} abandoned ({why})"

    def left_alone(self, what: str, command: str) -> str:
        """The one line of a `recover` that skipped work with this (fresh) lease; `command`: the recover to run."""
        return (f"skipped {what}: {self.describe()}; it counts as abandoned after {_stamp(self.until)}, then "
                f"'{command}' finishes it ('{command} --force' takes it over now)")

    def overridden(self) -> str:
        return f"--force: took over from {self.describe()}"


def read_lease(tags: dict[str, str] | None, now: datetime | None = None) -> Lease | None:
    """The lease on a resource's tags, judged at `now` (default `clock.now()`); None when there is none. A value
    that cannot be read is no lease: nobody can be shown to hold it."""
    match = _VALUE.match((tags or {}).get(LEASE, "").strip())
    if match is None:
        return None
    try:
        since, until = _read_time(match["since"]), _read_time(match["until"])
    except ValueError:
        return None
    lease = Lease(operation=match["operation"], host=match["host"], pid=int(match["pid"]), run_id=match["run_id"],
                  start=match["start"], pids=match["pids"], since=since, until=until)
    return lease.judged(now or clock.now())


def fresh_lease(tags: dict[str, str] | None, now: datetime | None = None) -> Lease | None:
    lease = read_lease(tags, now)
    return lease if lease is not None and lease.fresh else None


class LeaseHolder:
    """The lease of one running operation: its tag for create requests and intent writes, refreshed every
    `period_s` from a daemon thread on every resource it holds, released at the end (`with holder:`)."""

    def __init__(self, sm: Any, operation: str, *, now: Callable[[], datetime] | None = None,
                 period_s: float = PERIOD_S, expiry_s: float = EXPIRY_S, expire_on_release: bool = False,
                 warn: Callable[[str], None] | None = None):
        self.sm = sm
        self._warn = warn or _warn_on_stderr  # a failed refresh, said once per kind (`_failed`)
        self._warned: set[str] = set()
        self._fresh_until: dict[str, datetime] = {}  # what each resource's tag last said, as written
        self._now = now or (lambda: clock.now())
        self.period_s, self.expiry_s = period_s, expiry_s
        self.expire_on_release = expire_on_release  # a sweep: what is left is abandoned at once, not unleased
        started = self._now().astimezone(UTC).replace(microsecond=0)
        pid = os.getpid()
        self.lease = Lease(operation=operation, host=lease_owner.host_name(), pid=pid, run_id=secrets.token_hex(4),
                           start=lease_owner.started(pid), pids=lease_owner.process_table(), since=started,
                           until=started + timedelta(seconds=expiry_s))
        lease_owner.run_started(self.lease.run_id)  # until release: a reader in this process sees it running
        self._arns: list[str] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.lost: list[str] = []  # resources whose lease someone else removed or took over

    # writing -----------------------------------------------------------------------------------------------
    def value(self) -> str:
        """The tag's value, fresh until now + expiry."""
        self.lease = self.lease.model_copy(update={
            "until": self._now().astimezone(UTC).replace(microsecond=0) + timedelta(seconds=self.expiry_s)})
        return self.lease.to_tag()

    def tags(self) -> dict[str, str]:
        return {LEASE: self.value()}

    def with_tag(self, body: dict[str, Any]) -> dict[str, Any]:
        """A create request's body with this lease among its tags."""
        tags = [t for t in body.get("Tags", []) if t["Key"] != LEASE] + [{"Key": LEASE, "Value": self.value()}]
        return {**body, "Tags": tags}

    def hold(self, arn: str | None) -> None:
        """Keep refreshing (and at the end release) the lease on `arn`, which carries it already."""
        with self._lock:
            if arn and arn not in self._arns:
                self._arns.append(arn)
                self._fresh_until.setdefault(arn, self.lease.until)

    def drop(self, arn: str | None) -> None:
        """`arn` is gone, or its lease was cleared with the intent: nothing more to refresh or release there."""
        with self._lock:
            if arn in self._arns:
                self._arns.remove(arn)

    def drop_deleted(self, outcomes: list[Any]) -> None:
        """What a teardown deleted (its `Outcome`s): nothing more to refresh or release there."""
        gone = {(_ARN_PART.get(o.kind), o.name.lower()) for o in outcomes if o.result in ("deleted", "already gone")}
        for arn in self.held:
            part, _, name = arn.rpartition(":")[2].partition("/")
            if (part, name.lower()) in gone:
                self.drop(arn)

    @property
    def held(self) -> list[str]:
        with self._lock:
            return list(self._arns)

    def refresh(self) -> None:
        """One heartbeat: `until` moves on where the tag is still this run's. Failures wait for the next one."""
        for arn in self.held:
            try:
                if self._ours(arn):
                    value = self.value()
                    self.sm.add_tags(ResourceArn=arn, Tags=[{"Key": LEASE, "Value": value}])
                    self._fresh_until[arn] = self.lease.until
            except Exception as exc:  # noqa: BLE001 - a missed heartbeat; nine more before the lease expires
                self._failed(exc, arn)
                continue

    def _failed(self, exc: Exception, arn: str) -> None:
        """One line on stderr the first time a refresh is denied (the permission missing: action and resource),
        and the first time one fails otherwise; never a traceback, never every period."""
        from ..aws import error_code, error_message

        code = error_code(exc)
        kind = "denied" if code in ("AccessDenied", "AccessDeniedException") else "failed"
        with self._lock:
            if kind in self._warned:
                return
            self._warned.add(kind)
        stale = self._fresh_until.get(arn, self.lease.until)
        if kind == "denied":
            action = f"sagemaker:{getattr(exc, 'operation_name', None) or 'AddTags'}"
            self._warn(f"the {self.lease.operation}'s lease could not be refreshed: AWS denied {action} on {arn} "
                       f"({code}); its {LEASE} tag goes stale at {_stamp(stale)} and the {self.lease.operation} then "
                       f"looks abandoned to peagle status and recover: allow {action} there (peagle iam-policy "
                       f"{self.lease.operation} --json)")
            return
        reason = f"{code}: {error_message(exc)}" if code else (str(exc).splitlines() or [type(exc).__name__])[0]
        self._warn(f"the {self.lease.operation}'s lease on {arn} could not be refreshed ({reason}); peagle tries again "
                   f"every {self.period_s:g} s, and the lease stays fresh until {_stamp(stale)}")

    def release(self) -> None:
        """The operation ends: remove its lease (a sweep's: expire it) wherever it is still this run's."""
        lease_owner.run_ended(self.lease.run_id)
        for arn in self.held:
            try:
                if not self._ours(arn):
                    continue
                if self.expire_on_release:
                    ended = self.lease.model_copy(update={"until": self._now().astimezone(UTC).replace(microsecond=0)})
                    self.sm.add_tags(ResourceArn=arn, Tags=[{"Key": LEASE, "Value": ended.to_tag()}])
                else:
                    self.sm.delete_tags(ResourceArn=arn, TagKeys=[LEASE])
                self.drop(arn)
            except Exception:  # noqa: BLE001 - that lease then expires on its own; the command's outcome stands
                continue
            except BaseException:  # noqa: BLE001 - a second signal: the rest expire on their own
                break

    def _ours(self, arn: str) -> bool:
        from .tags import list_tags_if_present

        tags = list_tags_if_present(self.sm, arn)
        lease = read_lease(tags)
        if tags is None or lease is None or lease.run_id != self.lease.run_id:
            self.drop(arn)
            if tags is not None:
                self.lost.append(arn)
            return False
        return True

    # the heartbeat ----------------------------------------------------------------------------------------
    def beat(self, wait: Callable[[float], bool] | None = None) -> None:
        """Refresh every `period_s` until stopped (`wait` returns True): the daemon thread's loop."""
        wait = wait or self._stop.wait
        while not wait(self.period_s):
            self.refresh()

    def __enter__(self) -> LeaseHolder:
        self._thread = threading.Thread(target=self.beat, name=f"peagle-lease-{self.lease.operation}", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self.release()


def removed_meanwhile(sm: Any, exc: BaseException, made: list[tuple[str, str]], *, call: str,
                      operation: str) -> PeagleError | None:
    """A create refused with "Could not find ..." because what this command created a moment before is gone:
    someone removed it meanwhile (a `peagle recover --force` or `peagle cleanup` elsewhere). That, in one line,
    instead of SageMaker's "Could not find"; None when it is not so (or cannot be told)."""
    from ..aws import error_code, error_message
    from ..describe import describe

    if error_code(exc) != "ValidationException" or "could not find" not in error_message(exc).lower():
        return None
    gone = []
    for kind, name in reversed(made):  # the latest first: the one the failed create names
        try:
            if describe(sm, kind, name) is None:  # type: ignore[arg-type]
                gone.append(f"{'endpoint config' if kind == 'endpoint_config' else kind} {name}")
        except Exception:  # noqa: BLE001 - cannot tell: SageMaker's own message stands
            return None
    if not gone:
        return None
    return PeagleError(f"the {' and '.join(gone)} this {operation} created {'was' if len(gone) == 1 else 'were'} "
                       f"removed by someone else before {call} (a 'peagle recover --force' or 'peagle cleanup' "
                       "elsewhere?)", f"run the {operation} again")


def _warn_on_stderr(message: str) -> None:
    try:
        print(f"warning: {message}", file=sys.stderr, flush=True)
    except (OSError, ValueError):  # stderr closed: nothing to say it on
        pass


def _stamp(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _read_time(text: str) -> datetime:
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if moment.tzinfo is None:
        raise ValueError("no time zone")
    return moment.astimezone(UTC)
