"""`peagle deploy MODEL`: build the plan; with --dry-run print it, else hand it to the lifecycle."""

from __future__ import annotations

from typing import Annotated

import typer

from .common import JsonOpt, ProfileOpt, RegionOpt, YesOpt, run


def register(app: typer.Typer) -> None:
    app.command("deploy")(deploy)


def deploy(
    model: Annotated[str, typer.Argument(help="Model alias (see `peagle models`) or JumpStart model id.")],
    mode: Annotated[str, typer.Option(help="p-eagle (parallel drafting), eagle3 (sequential) or off.")] = "p-eagle",
    k: Annotated[str | None, typer.Option("--k", help="Speculative tokens per step (default: the model's).")] = None,
    name: Annotated[str | None, typer.Option(help="Endpoint name (also the model and config name).")] = None,
    instance_type: Annotated[str | None, typer.Option(help="An ml.g7e type the spec supports.")] = None,
    instance_count: Annotated[int | None, typer.Option(
        help="Instances behind the endpoint (default 1, or the --autoscale minimum).")] = None,
    allow_any_instance: Annotated[bool, typer.Option(help="Allow instance types outside ml.g7e.")] = False,
    region: RegionOpt = None,
    profile: ProfileOpt = None,
    role: Annotated[str | None, typer.Option(help="SageMaker execution role ARN (required to deploy).")] = None,
    accept_eula: Annotated[bool, typer.Option(help="Accept the model licence (required for gated models).")] = False,
    tag: Annotated[list[str] | None, typer.Option("--tag", help="Extra tag KEY=VALUE (repeatable).")] = None,
    env: Annotated[list[str] | None, typer.Option("--env", help="Extra container env KEY=VALUE (repeatable).")] = None,
    ttl: Annotated[str | None, typer.Option(help="Expiry, e.g. 90s, 15m, 4h, 1h30m, 2d (cleanup --expired removes it).")] = None,
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
        "--scale-to-zero", help="Host as an inference component that scales to zero instances after --idle without "
                                "a request, and back on the next one (minutes; requests fail meanwhile).")] = False,
    idle: Annotated[str | None, typer.Option(
        help="With --scale-to-zero: how long without a request before zero, whole minutes from 1m to 24h "
             "(default 15m).")] = None,
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
    yes: YesOpt = False,
    json_output: JsonOpt = False,
) -> None:
    """Deploy MODEL with P-EAGLE on an ml.g7e SageMaker endpoint (or print the plan with --dry-run)."""

    def body(out):
        from ..autoscale import parse_autoscale
        from ..aws import resolve_region
        from ..durations import parse_duration
        from ..inputs import TTL_MAX, parse_env, parse_max_price, parse_tags
        from ..plan import PlanRequest, build_plan
        from ..speculative import parse_mode
        from .render_plan import render_plan

        from ..plan_component import parse_hosting

        price_limit = parse_max_price(max_price_per_hour)
        shape, idle_rule = parse_hosting(hosting, scale_to_zero=scale_to_zero, idle=idle, wait=wait or dry_run)
        policy, count = parse_autoscale(autoscale, target_concurrency=target_concurrency,
                                        target_invocations=target_invocations, instance_count=instance_count,
                                        wait=wait or dry_run)
        user_env = parse_env(env or [])
        if not show_secrets:
            from ..redaction import register_secret_env

            register_secret_env(user_env)
        request = PlanRequest(
            model=model, model_id=model_id, model_version=model_version, mode=parse_mode(mode), k=k, name=name,
            instance_type=instance_type, instance_count=count, allow_any_instance=allow_any_instance,
            region=resolve_region(region), role=role, accept_eula=accept_eula, tags=parse_tags(tag or []),
            ttl=parse_duration(ttl, flag="--ttl", maximum=TTL_MAX) if ttl is not None else None, image=image,
            env=user_env, autoscale=policy, subnets=subnet or [], security_groups=security_group or [],
            kms_key=kms_key, hosting=shape, scale_to_zero=idle_rule,
            offline=offline or dry_run and _no_credentials(profile),
        )
        if request.offline:  # needs no AWS account: not even a readable AWS_PROFILE
            from ..aws import hide_broken_profile

            with hide_broken_profile():
                plan = build_plan(request, profile=profile)
        else:
            plan = build_plan(request, profile=profile)
        shown = plan
        if not show_secrets:  # masked in every output of this process, human and --json
            from ..redaction import mask_plan_env

            register_secret_env(plan.create_model["PrimaryContainer"].get("Environment", {}))
            shown = mask_plan_env(plan)
        from ..redaction import is_secret, revealing

        # --show-secrets: the --env values the user asked to see are exempt from the output's redaction
        with revealing([v for k, v in user_env.items() if is_secret(k, v)] if show_secrets else []):
            if dry_run:
                out.result({"dry_run": True, "plan": shown}, lambda console: render_plan(console, shown))
                return
            _deploy_for_real(out, plan, shown, profile=profile, wait=wait, timeout=timeout, yes=yes,
                             keep_on_failure=keep_on_failure, price_limit=price_limit,
                             price_explicit=max_price_per_hour is not None)

    run(json_output, body)


def _no_credentials(profile: str | None) -> bool:
    """A dry run without credentials resolves from the shipped specs at once instead of timing out."""
    from ..aws import credentials_available

    return not credentials_available(profile)


def _deploy_for_real(out, plan, shown, *, profile, wait, timeout, yes, keep_on_failure, price_limit,
                     price_explicit=False) -> None:
    import sys

    from ..aws import AwsSession
    from ..errors import UsageError
    from ..inputs import check_price
    from ..lifecycle import deploy as run_deploy
    from .. import clock
    from ..lifecycle.signals import SignalGuard
    from .render_plan import render_summary

    if "ExecutionRoleArn" not in plan.create_model:
        raise UsageError("a real deploy needs an execution role", "pass --role arn:aws:iam::<account>:role/<name>")
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
    if plan.resolution_source == "shipped":
        out.warn(f"the spec was resolved from peagle's shipped copy ({plan.resolution_detail}); "
                 "values marked unverified may not match JumpStart")
    price = "at an unknown price" if plan.price_per_hour_usd is None else \
        f"{plan.price.short() if plan.price else f'${plan.price_per_hour_usd:,.2f}/h'} ({plan.price_source})"
    if plan.autoscaling is not None:
        top = "an unknown price" if plan.max_price_per_hour_usd is None else f"${plan.max_price_per_hour_usd:,.2f}/h"
        price += f", autoscaling up to {plan.autoscaling.max_capacity} instances ({top})"
    if price_prompt:
        out.confirm(f"{price} is above the ${price_limit:,.2f}/h price guard. Really create "
                    f"{plan.instance_count} x {plan.instance_type}?", yes=False)
    out.confirm(f"Create {plan.endpoint_name} on {plan.instance_count} x {plan.instance_type}, {price}?", yes=yes)
    with out.status(f"creating {plan.endpoint_name}") as update:
        def progress(status, elapsed, doing):
            update(f"{plan.endpoint_name}: {status} ({int(elapsed)}s) - {doing}")

        result = run_deploy(plan, session, wait=wait, timeout_s=timeout,
                            keep_on_failure=keep_on_failure, on_progress=progress, on_note=out.note,
                            sleep=clock.sleep, clock=clock.monotonic)
    route = None
    if result.status == "InService":  # SageMaker's OpenAI route (a component's names it in its path)
        from ..runtime.openai_route import route_info

        route = route_info(session, result.endpoint_name, result.inference_component)

    def human(console):
        console.print(f"[bold]{result.endpoint_name}[/bold] is {result.status} after {int(result.elapsed_s)}s")
        if result.verification:
            console.print(f"  verification: {overall(result.verification)}", soft_wrap=True)
        render_checks(console, result.verification)
        if result.autoscaling is not None:
            console.print(f"  autoscaling: {result.autoscaling.policy.describe()}", soft_wrap=True)
        if result.inference_component is not None:
            console.print(f"  inference component: {result.inference_component} "
                          f"(invoke with InferenceComponentName={result.inference_component})", soft_wrap=True)
        if plan.component_scaling is not None and plan.component_scaling.idle is not None:
            console.print(f"  scale to zero: {plan.component_scaling.idle.describe()}", soft_wrap=True)
        if result.status != "InService":
            console.print(f"  follow it with: peagle status {result.endpoint_name} --region {result.region}")
        if route is not None:
            console.print(f"  OpenAI base URL: {route['base_url']} (api key: {route['command']})",
                          markup=False, soft_wrap=True)
        console.print(f"  remove it with: peagle cleanup {result.endpoint_name} --region {result.region} --yes")

    from ..lifecycle.verify import overall, render_checks

    document = {"deployed": result, "plan": shown, **({"openai": route} if route else {})}
    if result.verification:
        document["verification"] = overall(result.verification)
    out.result(document, human)
    for check in result.verification:
        for warning in check.warnings:
            out.warn(warning)
