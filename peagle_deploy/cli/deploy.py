"""`peagle deploy MODEL`: build the plan; with --dry-run print it, else hand it to the lifecycle."""

from __future__ import annotations

import functools
from typing import Annotated

import typer

from .acceptance_flags import AlarmOpt, FloorOpt
from .common import JsonOpt, ProfileOpt, YesOpt, run


def register(app: typer.Typer) -> None:
    app.command("deploy")(deploy)


def deploy(
    model: Annotated[str, typer.Argument(help="Model alias (see `peagle models`) or JumpStart model id.")],
    mode: Annotated[str, typer.Option(help="p-eagle (parallel drafting), eagle3 (sequential), dflash (its DFlash "
                                           "drafter, staged first) or off.")] = "p-eagle",
    k: Annotated[str | None, typer.Option("--k", help="Speculative tokens per step (default: the model's).")] = None,
    drafter: Annotated[str | None, typer.Option(
        help="--mode dflash: the DFlash drafter, s3://BUCKET/PREFIX (default: where `peagle drafter stage` put "
             "it).")] = None,
    name: Annotated[str | None, typer.Option(help="Endpoint name (also the model and config name).")] = None,
    instance_type: Annotated[str | None, typer.Option(
        help="An ml.g7e type the spec supports, or several in priority order (ml.g7e.2xlarge,ml.g7e.4xlarge): "
             "instance pools, SageMaker provisioning from the first with capacity.")] = None,
    instance_count: Annotated[int | None, typer.Option(
        help="Instances behind the endpoint (default 1, or the --autoscale minimum).")] = None,
    allow_any_instance: Annotated[bool, typer.Option(help="Allow instance types outside ml.g7e.")] = False,
    region: Annotated[str | None, typer.Option(
        "--region", help="AWS region (default: AWS_REGION, then us-east-1), or several in the order to try "
                         "(us-east-1,us-west-2): the next one only when no instance pool can serve in the one "
                         "before (capacity, quota).")] = None,
    profile: ProfileOpt = None,
    role: Annotated[str | None, typer.Option(help="SageMaker execution role ARN (required to deploy).")] = None,
    accept_eula: Annotated[bool, typer.Option(help="Accept the model licence (required for gated models).")] = False,
    tag: Annotated[list[str] | None, typer.Option("--tag", help="Extra tag KEY=VALUE (repeatable).")] = None,
    env: Annotated[list[str] | None, typer.Option("--env", help="Extra container env KEY=VALUE (repeatable). "
        "SM_VLLM_SPECULATIVE_CONFIG='{...}' adds vLLM keys to peagle's speculative config (not mode or K).")] = None,
    allow_lossy: Annotated[bool, typer.Option(
        "--allow-lossy", help="Deploy a lossy rejection_sample_method (fly, synthetic) given in "
                              "SM_VLLM_SPECULATIVE_CONFIG instead of refusing it: outputs then differ from the target's.")] = False,
    ttl: Annotated[str | None, typer.Option(help="Expiry, 15m to 30d, e.g. 4h, 1h30m, 2d (cleanup --expired removes it).")] = None,
    autoscale: Annotated[str | None, typer.Option(
        help="MIN:MAX instances for Application Auto Scaling (registered once InService; needs a target).")] = None,
    target_concurrency: Annotated[float | None, typer.Option(
        help="Autoscaling target: concurrent requests per instance (SageMaker's high-resolution concurrency metric).")] = None,
    target_invocations: Annotated[float | None, typer.Option(
        help="Autoscaling target instead: invocations per instance per minute (the older metric).")] = None,
    hosting: Annotated[str | None, typer.Option(
        help="endpoint (the model on the variant's instances) or component (an inference component; see "
             "docs/hosting.md). Default: endpoint, component with --scale-to-zero.")] = None,
    scale_to_zero: Annotated[bool, typer.Option(
        "--scale-to-zero", help="Host as an inference component that scales to zero instances after about 15 "
                                "minutes without a request (AWS's recipe: target tracking's own scale-in), and back "
                                "on the next one (minutes; requests fail meanwhile).")] = False,
    idle: Annotated[str | None, typer.Option(
        help="With --scale-to-zero: the idle period is AWS's (target tracking's scale-in alarm, about 15 minutes) "
             "and not settable; only 15m is accepted.")] = None,
    image: Annotated[str | None, typer.Option(help="Container image URI to use instead of JumpStart's.")] = None,
    model_id: Annotated[str | None, typer.Option(help="Override the JumpStart model id.")] = None,
    model_version: Annotated[str | None, typer.Option(help="JumpStart spec version (default: latest).")] = None,
    offline: Annotated[bool, typer.Option(help="Resolve from the specs peagle ships; no AWS calls.")] = False,
    dry_run: Annotated[bool, typer.Option(help="Print the complete plan and stop; needs no AWS account.")] = False,
    wait: Annotated[bool, typer.Option(help="Wait until the endpoint is InService.")] = True,
    timeout: Annotated[int, typer.Option(help="Seconds to wait for InService.")] = 3600,
    keep_on_failure: Annotated[bool, typer.Option(help="On failure keep what was created and print the cleanup command.")] = False,
    show_secrets: Annotated[bool, typer.Option(
        "--show-secrets", help="Print secret --env values (named HF_TOKEN, *_KEY, ... or shaped like a token: "
                                "ghp_..., hf_..., a JWT) instead of ***.")] = False,
    max_price_per_hour: Annotated[float | None, typer.Option(
        help="Accept a plan priced above this many USD/h without a prompt (default guard: 100); refused when "
             "the price is unknown.")] = None,
    subnet: Annotated[list[str] | None, typer.Option(
        "--subnet", help="VPC subnet id for the model's network (repeatable; needs --security-group).")] = None,
    security_group: Annotated[list[str] | None, typer.Option(
        "--security-group", help="VPC security group id (repeatable; needs --subnet).")] = None,
    kms_key: Annotated[str | None, typer.Option(
        "--kms-key", help="KMS key (id, ARN, alias/NAME or alias ARN) for the endpoint's ML storage volume.")] = None,
    provision_timeout: Annotated[int | None, typer.Option(
        help="Seconds SageMaker may try the instance pools (300-3600; with two or more --instance-type).")] = None,
    capacity_reservation: Annotated[str | None, typer.Option(
        help="ARN of an ML capacity reservation the variant takes its instances from.")] = None,
    capacity_reservation_preference: Annotated[str | None, typer.Option(
        help="capacity-reservations-only: no on-demand instances (default: the reservation first).")] = None,
    acceptance_alarm: AlarmOpt = True,
    acceptance_floor: FloorOpt = None,
    yes: YesOpt = False,
    json_output: JsonOpt = False,
) -> None:
    """Deploy MODEL with P-EAGLE on an ml.g7e SageMaker endpoint (or print the plan with --dry-run)."""

    def body(out):
        from ..autoscale import parse_autoscale
        from ..aws import resolve_region
        from ..inputs import parse_duration
        from ..inputs import TTL_MAX, parse_env, parse_max_price, parse_tags
        from ..plan import PlanRequest
        from ..errors import UsageError
        from ..inputs import parse_instance_types
        from ..lifecycle.regions import parse_regions
        from ..pools import parse_capacity_reservation
        from ..speculative import parse_mode_with_k
        from .render_plan import render_plan

        from ..plan_component import parse_hosting
        from .acceptance_flags import acceptance_request

        price_limit = parse_max_price(max_price_per_hour)
        shape, idle_rule = parse_hosting(hosting, scale_to_zero=scale_to_zero, idle=idle, wait=wait or dry_run)
        policy, count = parse_autoscale(autoscale, target_concurrency=target_concurrency,
                                        target_invocations=target_invocations, instance_count=instance_count,
                                        wait=wait or dry_run, component=shape.value == "component")
        user_env = parse_env(env or [])
        if not show_secrets:
            from ..redaction import register_secret_env

            register_secret_env(user_env)
        types = parse_instance_types(instance_type)  # two or more: instance pools, in priority order
        regions = parse_regions(region, resolve_region(None))  # two or more: tried in order (lifecycle/regions.py)
        where = regions[0]
        if len(regions) > 1 and capacity_reservation is not None:
            raise UsageError("--capacity-reservation names a reservation in one region; --region lists "
                             f"{len(regions)}", "pass one --region with --capacity-reservation")
        chosen_mode = parse_mode_with_k(mode, k)
        drafter_uri, drafter_source = drafter, "--drafter" if drafter else None
        if chosen_mode.value == "dflash" and drafter is None:  # where `peagle drafter stage` recorded it
            from ..drafters import locate

            drafter_uri, drafter_source = locate(model.strip().lower(), None, where)
        request = PlanRequest(
            model=model, model_id=model_id, model_version=model_version, mode=chosen_mode, k=k, name=name,
            drafter=drafter_uri, drafter_source=drafter_source,
            instance_type=types[0] if len(types) == 1 else None, instance_pools=types if len(types) > 1 else [],
            provision_timeout_s=provision_timeout, max_price_per_hour_usd=max_price_per_hour,
            capacity_reservation=parse_capacity_reservation(capacity_reservation, capacity_reservation_preference,
                                                            where),
            instance_count=count, allow_any_instance=allow_any_instance,
            region=where, role=role, accept_eula=accept_eula, tags=parse_tags(tag or []),
            ttl=parse_duration(ttl, flag="--ttl", maximum=TTL_MAX) if ttl is not None else None, image=image,
            env=user_env, allow_lossy=allow_lossy, autoscale=policy, subnets=subnet or [], security_groups=security_group or [],
            kms_key=kms_key, hosting=shape, scale_to_zero=idle_rule,
            acceptance=acceptance_request(acceptance_alarm, acceptance_floor, note=out.note, waits=wait),
            offline=offline or dry_run and _no_credentials(profile),
        )
        if len(regions) > 1:
            from ..jumpstart import check_region

            for other in regions:  # every region checked before any AWS call
                check_region(other)

        from datetime import UTC, datetime

        # one moment for every region's plan: the default name (and created-at) is the same in each (issue 49)
        plan_in = functools.partial(_plan_in, request, profile, now=datetime.now(UTC).replace(microsecond=0))
        masked = functools.partial(_masked, show_secrets=show_secrets)
        replan_for = _replan_for

        from ..redaction import is_secret, revealing

        # --show-secrets: the --env values the user asked to see are exempt from the output's redaction
        with revealing([v for k, v in user_env.items() if is_secret(k, v)] if show_secrets else []):
            if len(regions) > 1:
                _deploy_in_regions(out, regions, plan_in, masked, replan_for, dry_run=dry_run, types=types,
                                   profile=profile, wait=wait, timeout=timeout, yes=yes,
                                   keep_on_failure=keep_on_failure, price_limit=price_limit,
                                   price_explicit=max_price_per_hour is not None)
                return
            plan, facts, _ = plan_in(where)
            shown = masked(plan)
            if dry_run:
                out.result({"dry_run": True, "plan": shown}, lambda console: render_plan(console, shown))
                return
            _deploy_for_real(out, plan, shown, profile=profile, wait=wait, timeout=timeout, yes=yes,
                             keep_on_failure=keep_on_failure, price_limit=price_limit,
                             price_explicit=max_price_per_hour is not None,
                             replan=replan_for(plan, request, facts))

    run(json_output, body)


def _plan_in(request, profile, there: str, tried: list[str] | None = None, *, now=None):
    """(the plan, its facts, the request) for region `there`: the one builder with that region. `tried`: with
    --region A,B, the regions tried up to `there` (tagged on what it creates: `peagle:regions-tried`); `now`: the
    command's moment, the same for every region (the default name comes from it)."""
    from ..plan import FactSource, build_plan

    update = {"region": there} if there != request.region else {}
    if tried:
        update["regions_tried"] = tried
    asked = request.model_copy(update=update) if update else request
    facts = FactSource(profile=profile)
    if asked.offline:  # needs no AWS account: not even a readable AWS_PROFILE
        from ..aws import hide_broken_profile

        with hide_broken_profile():
            return build_plan(asked, facts=facts, now=now), facts, asked
    if asked.instance_pools:  # each pool held to its Service Quotas value (lifecycle/capacity.py)
        from ..aws import AwsSession
        from ..lifecycle.capacity import QuotaReader

        facts = FactSource(profile=profile, quota_lookup=QuotaReader(AwsSession(there, profile)))
    return build_plan(asked, facts=facts, now=now), facts, asked


def _masked(plan, *, show_secrets: bool):
    """The plan as every output of this process shows it: --env secrets masked (human and --json)."""
    if show_secrets:
        return plan
    from ..redaction import mask_plan_env, register_secret_env

    register_secret_env(plan.create_model["PrimaryContainer"].get("Environment", {}))
    return mask_plan_env(plan)


def _replan_for(plan, asked, facts):
    """What a quota refusal at CreateEndpoint plans next: the same request without the refused types."""
    from ..plan import build_plan

    return lambda refused: build_plan(asked.model_copy(update={
        "name": plan.endpoint_name, "instance_pools": [t for t in asked.instance_pools if t not in refused]}),
        facts=facts)


def _no_credentials(profile: str | None) -> bool:
    """A dry run without credentials resolves from the shipped specs at once instead of timing out."""
    from ..aws import credentials_available

    return not credentials_available(profile)


def _deploy_in_regions(out, regions, plan_in, masked, replan_for, *, dry_run, types, profile, wait, timeout, yes,
                       keep_on_failure, price_limit, price_explicit) -> None:
    """--region A,B: with --dry-run each region's plan in order; else each region tried in order until one
    deploys (lifecycle/regions.py), moving on only when no pool can serve there and nothing is left there."""
    from ..lifecycle.capacity import still_there
    from ..lifecycle.regions import family, try_regions
    from .render_plan import render_plan

    if dry_run:
        shown = [(there, masked(plan_in(there, regions[:index + 1])[0])) for index, there in enumerate(regions)]

        def human(console):
            for index, (there, plan) in enumerate(shown, 1):
                console.print(f"[bold]region {index} of {len(shown)}: {there}[/bold]")
                render_plan(console, plan)

        out.result({"dry_run": True, "regions": [{"region": there, "plan": plan} for there, plan in shown]}, human)
        return
    current: dict = {}

    def attempt(there):
        current.clear()
        plan, facts, asked = plan_in(there, regions[:regions.index(there) + 1])
        shown = masked(plan)
        session = _prepare(out, plan, shown, profile=profile, timeout=timeout, yes=yes, price_limit=price_limit,
                           price_explicit=price_explicit, where=f" in {there}")
        current.update(plan=plan, session=session)
        result = _create(out, plan, session, replan=replan_for(plan, asked, facts), wait=wait, timeout=timeout,
                         keep_on_failure=keep_on_failure)
        return plan, shown, session, result

    def left_behind(_there):
        if "plan" not in current:  # refused before any write (the plan, quota read at plan time)
            return []
        return still_there(current["session"], current["plan"])

    (plan, shown, session, result), attempts = try_regions(
        regions, attempt, left_behind=left_behind, kind=lambda: family(_types_of(current.get("plan")) or types),
        on_note=out.note)
    _report(out, plan, shown, session, result, attempts)


def _types_of(plan) -> list[str]:
    return [] if plan is None else plan.pool_types or [plan.instance_type]


def _deploy_for_real(out, plan, shown, *, profile, wait, timeout, yes, keep_on_failure, price_limit,
                     price_explicit=False, replan=None) -> None:
    session = _prepare(out, plan, shown, profile=profile, timeout=timeout, yes=yes, price_limit=price_limit,
                       price_explicit=price_explicit)
    result = _create(out, plan, session, replan=replan, wait=wait, timeout=timeout, keep_on_failure=keep_on_failure)
    _report(out, plan, shown, session, result)


def _prepare(out, plan, shown, *, profile, timeout, yes, price_limit, price_explicit=False, where=""):
    """Before any write: the role, the price guard, credentials, the summary and the confirmation; the session."""
    import sys

    from ..aws import AwsSession
    from ..errors import UsageError
    from ..inputs import check_price
    from ..lifecycle.signals import SignalGuard
    from .render_plan import fleet, render_summary

    if "ExecutionRoleArn" not in plan.create_model:
        raise UsageError("a real deploy needs an execution role", "pass --role arn:aws:iam::<account>:role/<name>")
    if plan.mode.value == "dflash" and plan.drafter_channel is None:
        raise UsageError(f"--mode dflash needs the {plan.model} DFlash drafter in S3",
                         f"stage it first: peagle drafter stage {plan.model} --method dflash --to s3://BUCKET/PREFIX "
                         "(or pass --drafter s3://BUCKET/PREFIX)")
    if timeout <= 0:
        raise UsageError(f"--timeout must be positive, got {timeout}", "pass --timeout 3600")
    # above the price guard --yes is not enough: a script names the price it accepts (--max-price-per-hour)
    interactive = sys.stdin is not None and sys.stdin.isatty()
    # with autoscaling the guard applies to the most it can scale to
    price_prompt = check_price(plan.max_price_per_hour_usd if plan.autoscaling else plan.price_per_hour_usd,
                               price_limit, interactive=interactive, explicit=price_explicit,
                               unknown_why=plan.price.detail if plan.price is not None else None,
                               unknown_fix=plan.price.fix if plan.price is not None else None)
    session = AwsSession(plan.region, profile)
    with SignalGuard("nothing was created"):  # SIGTERM/SIGHUP like Ctrl-C from here on (exit 130)
        session.check_credentials()  # no AWS access (exit 3) is said before the plan is shown and confirmed
    if not out.json_mode:
        render_summary(out.err_console, shown, title="peagle deploy: about to create")
    else:  # the summary's lines on the types left out of the pools, said on stderr all the same
        for pool in plan.pools:
            if not pool.kept:
                out.note(f"{pool.instance_type}: {pool.left_out}; deploying with {', '.join(plan.pool_types)}")
    if plan.resolution_source == "shipped":
        out.warn(f"the spec was resolved from peagle's shipped copy ({plan.resolution_detail}); "
                 "values marked unverified may not match JumpStart")
    price = "at an unknown price" if plan.price_per_hour_usd is None else \
        f"{plan.price.short() if plan.price else f'${plan.price_per_hour_usd:,.2f}/h'} ({plan.price_source})"
    if plan.autoscaling is not None:
        top = "an unknown price" if plan.max_price_per_hour_usd is None else f"${plan.max_price_per_hour_usd:,.2f}/h"
        price += f", autoscaling up to {plan.autoscaling.max_capacity} instances ({top})"
    if price_prompt:
        out.confirm(f"{price} is above the ${price_limit:,.2f}/h price guard. Really create {fleet(plan)}{where}?",
                    yes=False)
    out.confirm(f"Create {plan.endpoint_name} on {fleet(plan)}{where}, {price}?", yes=yes)
    return session


def _create(out, plan, session, *, replan, wait, timeout, keep_on_failure):
    """The deploy itself (a quota refusal of one pool answered by a replan: lifecycle/capacity.py)."""
    from .. import clock
    from ..lifecycle.capacity import deploy_with_replan
    from ..lifecycle.wait import progress_text

    with out.status(f"creating {plan.endpoint_name}") as update:
        def progress(status, elapsed, doing):
            update(f"{plan.endpoint_name}: {progress_text(status, elapsed, doing)}")

        return deploy_with_replan(plan, session, replan=replan, wait=wait, timeout_s=timeout,
                                  keep_on_failure=keep_on_failure, on_progress=progress, on_note=out.note,
                                  sleep=clock.sleep, clock=clock.monotonic)


def _report(out, plan, shown, session, result, attempts=None) -> None:
    """What was deployed, human or --json (with every region's attempt where several were listed)."""
    route = None
    if result.status == "InService":  # SageMaker's OpenAI route (a component's names it in its path)
        from ..runtime.openai_route import route_info

        route = route_info(session, result.endpoint_name, result.inference_component)

    def human(console):
        console.print(f"[bold]{result.endpoint_name}[/bold] is {result.status} after {int(result.elapsed_s)}s")
        if attempts is not None and len(attempts) > 1:
            console.print("  regions tried: " + ", ".join(f"{a.region} ({a.outcome})" for a in attempts),
                          markup=False, soft_wrap=True)
        if result.serving_pools:
            console.print(f"  {result.serving_pools}", markup=False, soft_wrap=True)
        if result.verification:
            console.print(f"  verification: {headline(result.verification)}", soft_wrap=True, markup=False)
        render_checks(console, result.verification)
        if result.autoscaling is not None:
            console.print(f"  autoscaling: {result.autoscaling.policy.describe()}", soft_wrap=True)
        if result.inference_component is not None:
            console.print(f"  inference component: {result.inference_component} "
                          f"(invoke with InferenceComponentName={result.inference_component})", soft_wrap=True)
        if plan.component_scaling is not None and plan.component_scaling.idle is not None:
            console.print(f"  scale to zero: {plan.component_scaling.idle.describe()}", soft_wrap=True)
        if result.acceptance_alarm is not None:
            console.print(f"  acceptance alarm: {result.acceptance_alarm}", markup=False, soft_wrap=True)
        if result.status != "InService":
            console.print(f"  follow it with: peagle status {result.endpoint_name} --region {result.region}")
        if route is not None:
            console.print(f"  OpenAI base URL: {route['base_url']} (api key: {route['command']})",
                          markup=False, soft_wrap=True)
        console.print(f"  remove it with: peagle cleanup {result.endpoint_name} --region {result.region} --yes")

    from ..lifecycle.verify import headline, overall, render_checks

    document = {"deployed": result, "plan": shown, **({"openai": route} if route else {})}
    if attempts is not None:
        from dataclasses import asdict

        document["attempts"] = [asdict(attempt) for attempt in attempts]
    if result.verification:
        document["verification"] = overall(result.verification)
    out.result(document, human)
    for check in result.verification:
        for warning in check.warnings:
            out.warn(warning)
