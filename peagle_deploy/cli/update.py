"""`peagle update NAME`: a new K, mode or instance fleet for a live endpoint, blue/green without downtime."""

from __future__ import annotations

from typing import Annotated

import typer

from .acceptance_flags import AlarmOpt, FloorOpt
from .common import JsonOpt, ProfileOpt, RegionOpt, YesOpt, given, run


def register(app: typer.Typer) -> None:
    app.command("update")(update)


def update(
    name: Annotated[str, typer.Argument(help="The endpoint to update (one peagle created).")],
    k: Annotated[str | None, typer.Option("--k", help="New speculative tokens per step.")] = None,
    mode: Annotated[str | None, typer.Option(help="New mode: p-eagle, eagle3, dflash or off.")] = None,
    drafter: Annotated[str | None, typer.Option(
        help="--mode dflash: the DFlash drafter, s3://BUCKET/PREFIX (default: the endpoint's, else where `peagle "
             "drafter stage` put it).")] = None,
    instance_type: Annotated[str | None, typer.Option(
        help="New instance type (an ml.g7e type the spec supports), or several in priority order: instance pools.")] = None,
    instance_count: Annotated[int | None, typer.Option(help="New number of instances.")] = None,
    allow_any_instance: Annotated[bool, typer.Option(help="Allow instance types outside ml.g7e.")] = False,
    accept_eula: Annotated[bool, typer.Option(help="Accept the licence of a gated drafter newly turned on.")] = False,
    allow_lossy: Annotated[bool, typer.Option(
        "--allow-lossy", help="Keep a lossy rejection_sample_method (fly, synthetic) the endpoint's speculative "
                              "config carries (added at deploy with --allow-lossy) instead of refusing.")] = False,
    bake: Annotated[str, typer.Option(
        help="Baking period: the new fleet takes all traffic, the old one stays until it ends (0s to 1h).")] = "5m",
    rollback_alarm: Annotated[list[str] | None, typer.Option(
        "--rollback-alarm", help="CloudWatch alarm that rolls the update back (repeatable, up to 10).")] = None,
    autoscale: Annotated[str | None, typer.Option(
        help="Autoscaling MIN:MAX registered after the update (default: keep the endpoint's).")] = None,
    target_concurrency: Annotated[float | None, typer.Option(
        help="Autoscaling target: concurrent requests per instance.")] = None,
    target_invocations: Annotated[float | None, typer.Option(
        help="Autoscaling target instead: invocations per instance per minute.")] = None,
    scale_to_zero: Annotated[bool, typer.Option(
        "--scale-to-zero", help="An inference component that scales to zero by an older peagle's own idle alarm: "
                                "move it to AWS's recipe (target tracking's scale-in). Any update of such an "
                                "endpoint does it too.")] = False,
    max_price_per_hour: Annotated[float | None, typer.Option(
        help="Accept a new fleet priced above this many USD/h without a prompt (default guard: 100); refused "
             "when the price is unknown.")] = None,
    acceptance_alarm: AlarmOpt = True,
    acceptance_floor: FloorOpt = None,
    region: RegionOpt = None,
    profile: ProfileOpt = None,
    timeout: Annotated[int, typer.Option(help="Seconds to wait for the update to finish.")] = 3600,
    dry_run: Annotated[bool, typer.Option(help="Print the update plan (every AWS write) and stop.")] = False,
    yes: YesOpt = False,
    json_output: JsonOpt = False,
) -> None:
    """Change K, mode or instances of a peagle endpoint: new config, blue/green UpdateEndpoint, verify, tidy up.

    On an endpoint hosting an inference component: K or mode, a new model the component is moved to."""

    def body(out):
        from ..autoscale import parse_autoscale
        from ..aws import AwsSession, resolve_region
        from ..inputs import parse_duration
        from ..errors import UsageError
        from ..inputs import parse_max_price
        from ..lifecycle.update_plan import UpdateRequest, check_request
        from ..speculative import parse_mode_with_k
        from .acceptance_flags import acceptance_request

        policy = None
        if autoscale is not None or target_concurrency is not None or target_invocations is not None:
            try:
                policy, _ = parse_autoscale(autoscale, target_concurrency=target_concurrency,
                                            target_invocations=target_invocations, instance_count=instance_count)
            except UsageError as refused:  # on a component-based endpoint, --autoscale is what is wrong
                flags = [f for f, v in (("--instance-type", instance_type), ("--instance-count", instance_count),
                                        ("--autoscale", autoscale), ("--rollback-alarm", rollback_alarm)) if v]
                raise _on_component(name, region, profile, flags) or refused from None
        from ..inputs import parse_instance_types

        types = parse_instance_types(instance_type)
        request = UpdateRequest(
            name=name, region=resolve_region(region), mode=parse_mode_with_k(mode, k) if mode is not None else None,
            k=k, drafter=drafter,
            instance_type=types[0] if len(types) == 1 else None, instance_pools=types if len(types) > 1 else [],
            instance_count=instance_count, allow_any_instance=allow_any_instance,
            accept_eula=accept_eula, bake=parse_duration(bake, flag="--bake"),  # inputs.DURATION_BOUNDS: 0s to 1h
            bake_given=given("bake"), rollback_alarms=list(rollback_alarm or []), autoscale=policy,
            scale_to_zero=scale_to_zero, allow_lossy=allow_lossy,
            acceptance=acceptance_request(acceptance_alarm, acceptance_floor, note=out.note))
        check_request(request)
        price_limit = parse_max_price(max_price_per_hour)
        if timeout <= 0:
            raise UsageError(f"--timeout must be positive, got {timeout}", "pass --timeout 3600")
        session = AwsSession(request.region, profile)
        if policy is not None and (mode, k, instance_type, instance_count) == (None, None, None, None):
            _rescale(out, session, request, dry_run=dry_run, yes=yes)  # the fleet stays: autoscaling only
        else:
            _update(out, session, request, price_limit=price_limit, price_given=max_price_per_hour is not None,
                    dry_run=dry_run, yes=yes, timeout=timeout)

    run(json_output, body)


def _on_component(name, region, profile, flags):
    """The refusal of `flags` when endpoint NAME hosts an inference component (update takes no --autoscale there),
    read with one DescribeEndpoint and its tags; None when it does not, or when that cannot be read (no credentials,
    no such endpoint, AWS unreachable): the flag's own refusal stands."""
    from ..aws import AwsSession, resolve_region
    from ..inputs import validate_name
    from ..lifecycle.components import hosting_of
    from ..lifecycle.tags import list_tags_if_present
    from ..lifecycle.update_plan import component_refusal

    try:
        validate_name(name)
        session = AwsSession(resolve_region(region), profile, max_attempts=2)
        if not session.has_credentials():
            return None
        sm = session.client("sagemaker")
        described = sm.describe_endpoint(EndpointName=name)
        tags = list_tags_if_present(sm, described["EndpointArn"])
    except Exception:  # noqa: BLE001 - nothing read: the flag's own refusal is the answer
        return None
    if tags is None or hosting_of(described, tags).hosting != "component":
        return None
    return component_refusal(name, flags)


def _writing(request):
    """The lock of `peagle update NAME` on this host, held from the first write to the last: two updates of one
    endpoint never interleave their writes; the second is refused in one line. Taken after the plan and the
    prompts, so a dry run or a refused input never waits for it (and an update that read a state another one
    then changed is refused by its re-check, lifecycle/update_run.py)."""
    from ..locks import hold, lock_dir

    return hold(lock_dir() / f"update-{request.region}-{request.name}.lock", f"updating {request.name}",
                hint="wait for it to finish (peagle status NAME shows the update), then run this update again")


def _rescale(out, session, request, *, dry_run: bool, yes: bool) -> None:
    from ..lifecycle.rescale import prepare_rescale, run_rescale
    from ..lifecycle.signals import SignalGuard

    with SignalGuard("nothing was changed"):
        session.check_credentials()
        plan = prepare_rescale(session, request)

    def show(console, title):
        from ..output import print_key_values

        print_key_values(console, [("endpoint", plan.endpoint_name), ("serves", f"{plan.serving} (unchanged)"),
                                   ("autoscaling now", plan.before.describe() if plan.before else "off"),
                                   ("after", plan.after.describe())], title=title)
        console.print("\n[bold]AWS writes, in order[/bold]")
        for number, write in enumerate(plan.writes, start=1):
            console.print(f"  {number}. {write}", soft_wrap=True, markup=False, highlight=False)
        for note in plan.notes:
            console.print(f"[cyan]note[/cyan] {note}", soft_wrap=True)

    document = {**plan.model_dump(mode="json"), "writes": plan.writes}
    if dry_run:
        out.result({"dry_run": True, "update": document},
                   lambda console: show(console, "peagle update --dry-run: nothing was changed"))
        return
    if not out.json_mode:
        show(out.err_console, "peagle update: about to change")
    out.confirm(f"Autoscale {plan.endpoint_name} {plan.after.describe()}?", yes=yes)
    with _writing(request):
        run_rescale(plan, session)
    out.result({"updated": document}, lambda console: console.print(
        f"{plan.endpoint_name} autoscales {plan.after.describe()}; it serves {plan.serving}", markup=False,
        soft_wrap=True))


def _update(out, session, request, *, price_limit: float, price_given: bool, dry_run: bool, yes: bool,
            timeout: int) -> None:
    from .. import clock
    from ..inputs import check_price
    from ..lifecycle.signals import SignalGuard
    from ..lifecycle.component_update import prepare_update
    from ..lifecycle.update_run import run_update

    with SignalGuard("nothing was changed"):
        session.check_credentials()
        facts = None
        if request.instance_pools:  # each pool held to its Service Quotas value, as deploy does
            from ..lifecycle.capacity import QuotaReader
            from ..plan import FactSource

            facts = FactSource(profile=session.profile, quota_lookup=QuotaReader(session))
        plan = prepare_update(session, request, sleep=clock.sleep, facts=facts)
    from ..lifecycle.component_update import ComponentUpdatePlan

    if isinstance(plan, ComponentUpdatePlan):
        _update_component(out, session, plan, dry_run=dry_run, yes=yes, timeout=timeout, lock=_writing(request))
        return
    from ..lifecycle.component_update import MovePlan

    if isinstance(plan, MovePlan):
        _move_scaling(out, session, plan, dry_run=dry_run, yes=yes, lock=_writing(request))
        return
    from ..redaction import register_secret_env

    # the live container's HF_TOKEN & co. (deploy --env): masked in every output, as deploy masks them
    register_secret_env(plan.verify_plan.create_model["PrimaryContainer"].get("Environment", {}))
    if dry_run:
        out.result({"dry_run": True, "update": _document(plan)}, lambda console: render_update(console, plan))
        return
    import sys

    interactive = sys.stdin is not None and sys.stdin.isatty()
    price_prompt = check_price(plan.price_per_hour_usd, price_limit, interactive=interactive, explicit=price_given,
                               unknown_why=plan.price.detail if plan.price is not None else None,
                               unknown_fix=plan.price.fix if plan.price is not None else None)
    if not out.json_mode:
        render_update(out.err_console, plan, title="peagle update: about to change", bodies=False)
    if price_prompt:
        out.confirm(f"about ${plan.price_per_hour_usd:,.2f}/h is above the ${price_limit:,.2f}/h price guard. "
                    f"Really run {plan.target.instance_count} x {plan.target.instance_type}?", yes=False)
    out.confirm(f"Update {plan.endpoint_name} from {plan.current.label(with_instances=True)} to "
                f"{plan.target.label(with_instances=True)}?", yes=yes)
    from ..lifecycle.wait import progress_text

    with _writing(request), out.status(f"updating {plan.endpoint_name}") as show:
        def progress(status, elapsed, doing):
            show(f"{plan.endpoint_name}: {progress_text(status, elapsed, doing)}")

        result = run_update(plan, session, timeout_s=timeout, on_progress=progress, on_note=out.note,
                            sleep=clock.sleep, clock=clock.monotonic)

    _print_result(out, result, f"[bold]{result.endpoint_name}[/bold] serves "
                                f"{result.serving.label(with_instances=True)} ({result.serving.endpoint_config}) "
                                f"after {int(result.elapsed_s)}s; it served {result.previous.label(with_instances=True)}")


def _update_component(out, session, plan, *, dry_run: bool, yes: bool, timeout: int, lock) -> None:
    """K or mode of a component-based endpoint (lifecycle/component_update.py): a new model, the component moved."""
    from .. import clock
    from ..lifecycle.component_update import run_component_update
    from ..redaction import register_secret_env

    register_secret_env(plan.create_model["PrimaryContainer"].get("Environment", {}))
    if dry_run:
        out.result({"dry_run": True, "update": _document(plan)}, lambda console: render_component_update(console, plan))
        return
    if not out.json_mode:
        render_component_update(out.err_console, plan, title="peagle update: about to change", bodies=False)
    out.confirm(f"Update inference component {plan.component} of {plan.endpoint_name} from {plan.current.label()} "
                f"to {plan.target.label()}?", yes=yes)
    from ..lifecycle.wait import progress_text

    with lock, out.status(f"updating {plan.component}") as show:
        def progress(status, elapsed, doing):
            show(f"{plan.component}: {progress_text(status, elapsed, doing)}")

        result = run_component_update(plan, session, timeout_s=timeout, on_progress=progress, on_note=out.note,
                                      sleep=clock.sleep, clock=clock.monotonic)
    _print_result(out, result, f"[bold]{result.endpoint_name}[/bold]: inference component {plan.component} serves "
                               f"{result.serving.label()} (model {result.serving.model}) after "
                               f"{int(result.elapsed_s)}s; it served {result.previous.label()}")


def _move_scaling(out, session, plan, *, dry_run: bool, yes: bool, lock) -> None:
    """`--scale-to-zero` alone: an older peagle's idle rule moved to AWS's recipe (lifecycle/scaling_migration.py)."""
    from ..lifecycle.component_update import run_move

    def show(console, title):
        from ..output import print_key_values

        print_key_values(console, [
            ("endpoint", plan.endpoint_name), ("region", plan.region), ("inference component", plan.component),
            ("scale to zero now", "an older peagle's idle rule (a metric-math alarm, unconfirmed on AWS)"
             if plan.move is not None else "AWS's recipe (target tracking's own scale-in): nothing to move"),
            ("after", "AWS's recipe: target tracking's own scale-in, about 15 minutes without a request")],
            title=title)
        console.print("\n[bold]AWS writes, in order[/bold]")
        for number, write in enumerate(plan.writes, start=1):
            console.print(f"  {number}. {write}", soft_wrap=True, markup=False, highlight=False)
        if not plan.writes:
            console.print("  none", soft_wrap=True, markup=False, highlight=False)

    document = {**plan.model_dump(mode="json"), "writes": plan.writes}
    if dry_run or plan.move is None:
        title = ("peagle update --dry-run: nothing was changed" if dry_run else
                 f"peagle update: {plan.endpoint_name} already scales to zero by AWS's recipe; nothing was changed")
        out.result({"dry_run": dry_run, "update": document}, lambda console: show(console, title))
        return
    if not out.json_mode:
        show(out.err_console, "peagle update: about to change")
    out.confirm(f"Move the scaling of {plan.component} to AWS's scale-to-zero recipe?", yes=yes)
    with lock:
        done = run_move(plan, session)
    out.result({"updated": {**document, "done": done}}, lambda console: console.print(
        f"{plan.endpoint_name}: inference component {plan.component} scales to zero by AWS's recipe ("
        + "; ".join(done) + ")", markup=False, soft_wrap=True))


def _print_result(out, result, headline: str) -> None:
    """Either shape's finished update: the headline, the verification, what became of the previous resources."""
    from ..lifecycle.verify import headline as verified_headline
    from ..lifecycle.verify import overall, render_checks

    def human(console):
        console.print(headline, soft_wrap=True)
        console.print(f"  verification: {verified_headline(result.verification)}", soft_wrap=True, markup=False)
        render_checks(console, result.verification)
        for outcome in result.removed:
            label = "endpoint config" if outcome.kind == "endpoint_config" else "model"
            reason = f": {outcome.reason}" if outcome.reason else ""
            console.print(f"  previous {label} {outcome.name}: {outcome.result}{reason}", soft_wrap=True)

    out.result({"updated": result, "verification": overall(result.verification)}, human)
    for check in result.verification:
        for warning in check.warnings:
            out.warn(warning)


def render_component_update(console, plan, *, title: str = "peagle update --dry-run: nothing was changed",
                            bodies: bool = True) -> None:

    from ..output import print_key_values

    print_key_values(console, [
        ("endpoint", plan.endpoint_name),
        ("region", plan.region),
        ("inference component", plan.component),
        ("now", f"{plan.current.label()} (model {plan.current.model})"),
        ("after", f"{plan.target.label()} (model {plan.target.model})"),
        ("speculative config", plan.speculative_config or "none"),
        ("instances", f"unchanged: {plan.current.instance_type} (endpoint config {plan.current.endpoint_config})"),
        ("deployment", "UpdateInferenceComponent: SageMaker replaces the component's copies with ones of the new "
                       "model"),
    ], title=title)
    _writes_and_bodies(console, plan, [("CreateModel", plan.create_model),
                                       ("UpdateInferenceComponent", plan.update_component)] if bodies else [])


def _writes_and_bodies(console, plan, bodies: list[tuple[str, dict | None]]) -> None:
    """The plan's AWS writes in order, its notes, then each request body (None: not sent) as JSON."""
    import json

    console.print("\n[bold]AWS writes, in order[/bold]")
    for number, write in enumerate(plan.writes, start=1):
        console.print(f"  {number}. {write}", soft_wrap=True, markup=False, highlight=False)
    for note in plan.notes:
        console.print(f"[cyan]note[/cyan] {note}", soft_wrap=True)
    if not bodies:
        return
    from rich.json import JSON

    from .render_plan import tags_once

    for title_, body in tags_once(console, bodies):
        if body is not None:
            console.print(f"\n[bold]{title_}[/bold]")
            console.print(JSON(json.dumps(body), indent=2), soft_wrap=True)


def _document(plan) -> dict:
    return {**plan.model_dump(mode="json"), "writes": plan.writes}


def _rollback_alarms(plan) -> list[str]:
    return [a["AlarmName"] for a in (plan.update_endpoint.get("DeploymentConfig") or {}).get(
        "AutoRollbackConfiguration", {}).get("Alarms", [])]


def render_update(console, plan, *, title: str = "peagle update --dry-run: nothing was changed",
                  bodies: bool = True) -> None:

    from ..output import print_key_values

    price = plan.price.describe() if plan.price is not None else (
        "unknown" if plan.price_per_hour_usd is None else f"${plan.price_per_hour_usd:,.2f}/h")
    rows = [
        ("endpoint", plan.endpoint_name),
        ("region", plan.region),
        ("now", f"{plan.current.label(with_instances=True)} ({plan.current.endpoint_config})"),
        ("after", f"{plan.target.label(with_instances=True)} ({plan.target.endpoint_config})"),
        ("speculative config", plan.speculative_config or "none"),
        ("model", "new: " + plan.target.model if plan.create_model else f"kept: {plan.target.model}"),
        ("deployment", f"blue/green, all at once, {plan.bake_s}s baking period"
                       + (f", rollback on {', '.join(_rollback_alarms(plan))}" if _rollback_alarms(plan) else "")),
        *([("acceptance alarm", f"{plan.acceptance_alarm.describe()}; floor: {plan.acceptance_alarm.floor.source}")]
          if plan.acceptance_alarm is not None else []),
        ("price", f"{price}; both fleets run until the baking period ends"),
        *(("pool" if pool.kept else "left out", pool.line()) for pool in plan.verify_plan.pools),
    ]
    print_key_values(console, rows, title=title)
    _writes_and_bodies(console, plan, [("CreateModel", plan.create_model),
                                       *((f"CreateModel {m['ModelName']} (instance pool)", m)
                                         for m in plan.create_pool_models),
                                       ("CreateEndpointConfig", plan.create_endpoint_config),
                                       ("UpdateEndpoint", plan.update_endpoint)] if bodies else [])
