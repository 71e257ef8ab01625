"""After InService: prove that what SageMaker holds is what the plan asked for.

Users have been burned by the speculative config and the drafter channel being silently dropped,
and by JumpStart deploying another instance type than asked; each is checked against the live
resources, not the request we sent.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field, computed_field

from ..errors import EndpointFailed
from ..speculative import DRAFTER_CHANNELS, ENV_VAR

if TYPE_CHECKING:  # annotations only: `status` checks start-up logs without importing the plan's models
    from ..plan import DeploymentPlan


VERIFIED, FAILED, NOT_VERIFIED = "verified", "failed", "not verified"
State = Literal["verified", "failed", "not verified"]
# grep -iE for the start-up lines that say what runs: the parsed config, the config as given, and the lines only
# P-EAGLE (runner fallback), only EAGLE-3 (mask_hidden skipped) or only DFlash (its speculator, mask embedding) writes
BY_HAND_PATTERN = "speculative_config|non-default args|parallel drafting|dflash"


class Check(BaseModel):
    """One check, with three outcomes: it ran and agreed (verified), it ran and disagreed (failed), or it could
    not run (not verified: `detail` says why, `how_to_check` how to check by hand). Only `verified` is ok."""

    name: str
    state: State
    expected: Any = None
    actual: Any = None
    detail: str | None = None
    how_to_check: str | None = None
    warnings: list[str] = []
    parts: dict[str, State] = Field(default_factory=dict, description="a check that is not verified as a whole: "
                                    "the state of each fact it compared (vLLM start-up: method, K, mode)")

    @computed_field  # type: ignore[prop-decorator]
    @property
    def ok(self) -> bool:
        return self.state == VERIFIED

    @classmethod
    def compare(cls, name: str, agrees: bool, **fields: Any) -> Check:
        return cls(name=name, state=VERIFIED if agrees else FAILED, **fields)

    def line(self) -> str:
        """'verified', 'FAILED (...)' or 'not verified (why; check by hand: ...)', for one terminal line."""
        if self.state == VERIFIED:
            return "verified" + (f" ({self.detail})" if self.detail else "")
        if self.state == FAILED:
            return "FAILED" + (f" ({self.detail})" if self.detail else
                               f" (expected {self.expected!r}, found {self.actual!r})")
        parts = [p for p in (self.detail, f"check by hand: {self.how_to_check}" if self.how_to_check else None) if p]
        return "not verified" + (f" ({'; '.join(parts)})" if parts else "")


def _json_or_text(value: str | None) -> Any:
    if value is None:
        return None
    try:
        return json.loads(value)
    except ValueError:
        return value


def startup_check(info: Any, expected: dict[str, Any] | None, *, how_to_check: str) -> Check:
    """The speculative config vLLM says it parsed at start-up against the one it was given (None: off).
    Verified or failed only when vLLM's own lines say it; otherwise not verified, with why.

    vLLM's engine line names method eagle3 and K for P-EAGLE and EAGLE-3 alike: P-EAGLE is verified only on a
    line EAGLE-3 would not log (`StartupInfo.parallel_drafting`); without one the check is not verified, method
    and K verified in `parts`. EAGLE-3 is parallel drafting's absence, vLLM's default: its engine line verifies
    it, and a line that says parallel drafting fails it."""
    from ..served_config import speculation_from_config

    actual = info.model_dump(exclude={"warnings"})
    sent = speculation_from_config(expected)
    fields = {"name": "vLLM start-up", "expected": expected, "actual": actual, "warnings": info.warnings}
    if info.speculation_off or info.speculative:
        logged = info.speculative or {}
        if expected is None or info.speculation_off:
            differ = [] if (expected is None) == bool(info.speculation_off) else ["speculation"]
        else:  # only what vLLM logged is compared (parallel_drafting only where a line said it)
            keys = ("method", "num_speculative_tokens", "parallel_drafting")
            differ = [key for key in keys if key in logged and key in expected and logged[key] != expected[key]]
        if differ:
            ran = speculation_from_config(logged or None)
            if info.speculation_off:
                what = "without speculative decoding"
            elif expected is None:
                what = f"with speculative decoding ({ran.describe()})"
            else:
                what = "with " + ", ".join(f"{key}={logged[key]!r}" for key in differ) + f" ({ran.describe()})"
            said = f"; it logged: {info.parallel_drafting_line}" if "parallel_drafting" in differ else ""
            return Check(state=FAILED, detail=f"vLLM started {what}, not {sent.describe()} ({info.source}{said})",
                         **fields)
        if expected is not None and expected.get("parallel_drafting") is True and "parallel_drafting" not in logged:
            parts: dict[str, State] = {name: VERIFIED for key, name in (("method", "method"),
                                       ("num_speculative_tokens", "K")) if key in logged and key in expected}
            parts["mode"] = NOT_VERIFIED
            why = (f"{info.summary()}: {' and '.join([*parts][:-1]) or 'nothing'} verified, P-EAGLE not: no line "
                   "read says parallel drafting, and a sequential EAGLE-3 server logs the same engine line")
            return Check(state=NOT_VERIFIED, detail=why, how_to_check=how_to_check, parts=parts, **fields)
        return Check(state=VERIFIED, detail=info.summary(), **fields)  # the line that says the mode: actual
    if info.found:
        why = f"vLLM logged its start ({info.summary()}) but not the speculative config it parsed"
    else:
        why = info.note or "no vLLM start-up lines found"
    return Check(state=NOT_VERIFIED, detail=why, how_to_check=how_to_check, **fields)


def by_hand(endpoint: str, region: str | None = None) -> str:
    where = f" --region {region}" if region else ""
    return f"peagle logs {endpoint}{where} --since 1h | grep -iE '{BY_HAND_PATTERN}' once the container has started"


def vllm_startup(logs: Any, plan: DeploymentPlan, *, sleep: Callable[[float], None] = time.sleep,
                 since_ms: int | None = None) -> Check:
    """What vLLM logged at start (CloudWatch, lines from `since_ms` on): its parsed speculative config against
    the plan's. Logs lag or may be missing: that is 'not verified', never 'ok'."""
    from .startup_log import read_cloudwatch

    expected = json.loads(plan.speculative_config) if plan.speculative_config else None
    info = read_cloudwatch(logs, plan.endpoint_name, expected=expected, sleep=sleep, start_ms=since_ms)
    return startup_check(info, expected, how_to_check=by_hand(plan.endpoint_name, plan.region))


def verify(sm: Any, plan: DeploymentPlan, logs: Any = None, *, sleep: Callable[[float], None] = time.sleep,
           read: Callable[[Callable[[], Any]], Any] = lambda call: call(), logs_since_ms: int | None = None) -> list[Check]:
    """`read` wraps each describe (deploy passes `wait.read_retrying`: a transient error is asked again);
    `logs_since_ms`: start-up lines older than this belong to an earlier fleet and are not read."""
    model = read(lambda: sm.describe_model(ModelName=plan.create_model["ModelName"]))
    container = model.get("PrimaryContainer", {})
    env = container.get("Environment", {})
    channels = {c.get("ChannelName"): c for c in container.get("AdditionalModelDataSources", [])}
    wanted = plan.drafter_channel["ChannelName"] if plan.drafter_channel else None
    drafter = channels.get(wanted) if wanted else next((channels[c] for c in DRAFTER_CHANNELS if c in channels), None)
    expected_uri = plan.drafter_channel["S3DataSource"]["S3Uri"] if plan.drafter_channel else None
    config = read(lambda: sm.describe_endpoint_config(
        EndpointConfigName=plan.create_endpoint_config["EndpointConfigName"]))
    variants = config.get("ProductionVariants", [])
    checks = [
        Check.compare("speculative config", _json_or_text(env.get(ENV_VAR)) == _json_or_text(plan.speculative_config),
                      expected=plan.speculative_config, actual=env.get(ENV_VAR)),
        Check.compare("drafter channel", (drafter["S3DataSource"]["S3Uri"] if drafter else None) == expected_uri,
                      expected=expected_uri, actual=drafter["S3DataSource"]["S3Uri"] if drafter else None),
        Check.compare("instance type", [v.get("InstanceType") for v in variants] == [plan.instance_type],
                      expected=plan.instance_type, actual=[v.get("InstanceType") for v in variants])
        if not plan.pools else pools_check(plan, variants),
    ]
    for body in plan.create_pool_models:  # an instance pool's own model runs the same speculative config
        held = read(lambda b=body: sm.describe_model(ModelName=b["ModelName"]))
        value = (held.get("PrimaryContainer") or {}).get("Environment", {}).get(ENV_VAR)
        checks.append(Check.compare(f"speculative config of {body['ModelName']}",
                                    _json_or_text(value) == _json_or_text(plan.speculative_config),
                                    expected=plan.speculative_config, actual=value))
    checks.extend(network_checks(plan, model, config))
    if logs is not None:
        checks.append(vllm_startup(logs, plan, sleep=sleep, since_ms=logs_since_ms))
    return checks


def pools_check(plan: DeploymentPlan, variants: list[dict[str, Any]]) -> Check:
    """The variant's instance pools as SageMaker holds them: types by priority and each pool's model."""
    def shape(pools: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
        return sorted((p.get("Priority"), p.get("InstanceType"), p.get("ModelNameOverride")) for p in pools)

    expected = plan.create_endpoint_config["ProductionVariants"][0]["InstancePools"]
    actual = [v.get("InstancePools") for v in variants]
    return Check.compare("instance pools", len(actual) == 1 and shape(actual[0] or []) == shape(expected),
                         expected=expected, actual=actual)


def network_checks(plan: DeploymentPlan, model: dict[str, Any], config: dict[str, Any]) -> list[Check]:
    """--subnet/--security-group and --kms-key as SageMaker holds them (checked only when asked for)."""
    checks = []
    if plan.vpc_config:
        held = model.get("VpcConfig") or {}
        expected = {key: sorted(values) for key, values in plan.vpc_config.items()}
        actual = {key: sorted(held.get(key) or []) for key in expected}
        checks.append(Check.compare("VPC config", actual == expected, expected=expected, actual=held or None))
    if plan.kms_key_id:
        checks.append(Check.compare("volume KMS key", config.get("KmsKeyId") == plan.kms_key_id,
                                    expected=plan.kms_key_id, actual=config.get("KmsKeyId")))
    return checks


def require(checks: list[Check]) -> None:
    """A check that ran and disagreed fails the deploy; one that could not run does not (it says so)."""
    failed = [c for c in checks if c.state == FAILED]
    if failed:
        what = "; ".join(c.detail or f"{c.name}: expected {c.expected!r}, found {c.actual!r}" for c in failed)
        raise EndpointFailed(f"verification failed: {what}", "the endpoint does not run what was planned")


def overall(checks: list[Check]) -> str:
    """The verification as one state: failed if any check failed, verified only if every check was."""
    if any(c.state == FAILED for c in checks):
        return FAILED
    return VERIFIED if checks and all(c.state == VERIFIED for c in checks) else NOT_VERIFIED


def headline(checks: list[Check]) -> str:
    """The verification in one line, naming the checks that decide it: 'FAILED (drafter channel)', 'not verified
    (vLLM start-up; the other 4 checks verified)', 'verified (5 checks)'."""
    state = overall(checks)
    deciding = [c.name for c in checks if c.state == state] if state != VERIFIED else []
    rest = len([c for c in checks if c.state == VERIFIED])
    if state == VERIFIED:
        return f"{VERIFIED} ({len(checks)} check{'s' if len(checks) != 1 else ''})"
    if not deciding:
        return state
    others = f"; the other {rest} check{'s' if rest != 1 else ''} verified" if rest else ""
    return f"{state} ({', '.join(deciding)}{others})"


def render_checks(console: Any, checks: list[Check]) -> None:
    """One line per check: verified (green), FAILED (red), not verified with why and how (yellow)."""
    from rich.markup import escape

    style = {VERIFIED: "green", FAILED: "red", NOT_VERIFIED: "yellow"}
    for check in checks:
        state, _, rest = check.line().partition(" (")
        detail = f" ({escape(rest)}" if rest else ""
        console.print(f"  {check.name}: [{style[check.state]}]{state}[/{style[check.state]}]{detail}",
                      soft_wrap=True)
