"""`peagle sweep MODEL`: off, EAGLE-3 and P-EAGLE at several K, deployed, benched and torn down under a budget."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from .common import JsonOpt, ProfileOpt, RegionOpt, YesOpt, run


def register(app: typer.Typer) -> None:
    app.command("sweep")(sweep)


def sweep(
    ctx: typer.Context,
    model: Annotated[str | None, typer.Argument(help="Model alias (see `peagle models`); with --url only a label.")] = None,
    modes: Annotated[str, typer.Option(help="Modes to measure, comma-separated (off runs once, without K).")] = "off,eagle3,p-eagle",
    k: Annotated[str, typer.Option("--k", help="Speculative tokens K for eagle3, p-eagle and dflash, comma-separated.")] = "3,7,11",
    drafter: Annotated[str | None, typer.Option(help="dflash: the staged DFlash drafter, s3://BUCKET/PREFIX (default: where `peagle drafter stage` put it).")] = None,
    concurrency: Annotated[str, typer.Option("--concurrency", "-c", help="Concurrency levels, comma-separated.")] = "1,4,8,32",
    dataset: Annotated[str, typer.Option("--dataset", "-d", help="humaneval or mt-bench (fetched on first use), "
                                                "humaneval-like, code, chat, or a JSONL file.")] = "humaneval",
    duration: Annotated[float, typer.Option(min=0.1, help="Seconds measured per level (also the estimate's).")] = 60.0,
    num_prompts: Annotated[int | None, typer.Option("--num-prompts", "-n", min=1, help="Measured requests per level instead of --duration.")] = None,
    warmup: Annotated[int | None, typer.Option(min=0, help="Warm-up requests per level (default: its concurrency).")] = None,
    max_tokens: Annotated[int, typer.Option(min=1, help="max_tokens of each request.")] = 256,
    budget: Annotated[float | None, typer.Option(help="USD the sweep may spend (required to deploy); refused above it.")] = None,
    parallel: Annotated[int, typer.Option(min=1, max=32, help="Endpoints at once (never beyond the quota).")] = 1,
    instance_type: Annotated[str | None, typer.Option(help="An ml.g7e type (default: the model's); with --url, for cost.")] = None,
    role: Annotated[str | None, typer.Option(help="SageMaker execution role ARN (required to deploy).")] = None,
    accept_eula: Annotated[bool, typer.Option(help="Accept the model licence (gated models).")] = False,
    ttl: Annotated[str | None, typer.Option(help="TTL of each endpoint (default: twice its estimated time, >= 1h).")] = None,
    provision_estimate: Annotated[float, typer.Option(min=0, help="Estimated seconds to InService, for the plan.")] = 600.0,
    logs_wait: Annotated[float, typer.Option(min=0, help="Seconds to wait for acceptance lines in CloudWatch.")] = 60.0,
    timeout: Annotated[int, typer.Option(min=1, help="Seconds to wait for each endpoint to be InService.")] = 3600,
    agreement_prompts: Annotated[int, typer.Option(min=0, help="Prompts whose greedy outputs each configuration must reproduce from off's (0: no check).")] = 16,
    url: Annotated[list[str] | None, typer.Option("--url", help="MODE:K=URL of a server you run (off=URL); repeat, one per configuration; no AWS. On --resume: the "
                                                                    "same URL again, to give back the password the state file does not keep "
                                                                    "(or set PEAGLE_SWEEP_URL_PASSWORD).")] = None,
    trust_labels: Annotated[bool, typer.Option("--trust-labels", help="Measure a --url server even when its /metrics contradict its MODE:K label (refused otherwise).")] = False,
    hosting: Annotated[str | None, typer.Option(help="endpoint (default): one endpoint per configuration. component: ONE multi-GPU ml.g7e endpoint (--instance-type, else the smallest with a GPU per configuration, or batches), each configuration an inference component of it, measured one at a time; --dry-run shows both estimates.")] = None,
    dry_run: Annotated[bool, typer.Option(help="Print the plan (endpoints, time, dollars vs --budget) and stop.")] = False,
    state: Annotated[Path | None, typer.Option(help="State file (default: OUT/sweep-state.json).")] = None,
    resume: Annotated[Path | None, typer.Option(help="Continue the sweep of this state file (removes what a killed run left); with --budget, under that new budget.")] = None,
    redo: Annotated[list[str] | None, typer.Option("--redo", help="With --resume: measure this configuration again, e.g. when its result file is missing or damaged ('p-eagle K=3' or p-eagle-k3; repeatable).")] = None,
    out_dir: Annotated[Path, typer.Option("--out", "-o", help="Folder for the report (JSON, Markdown, PNG) and runs.")] = Path("peagle-sweep"),
    region: RegionOpt = None,
    profile: ProfileOpt = None,
    yes: YesOpt = False,
    json_output: JsonOpt = False,
) -> None:
    """Deploy, verify, bench and tear down each (mode, K) under a --budget; one report like the published table."""

    def body(out):
        from ..errors import UsageError
        from ..safe_write import check_file_path, probe_writable, tidy_new_dirs
        from ..sweep.state import STATE_NAME, StateFile

        if redo and resume is None:
            raise UsageError("--redo goes with --resume STATE", "pass the state file of the sweep whose "
                                                                "configuration to measure again")
        if resume is not None:
            check_file_path(resume, flag="--resume", must_exist=True, example=STATE_NAME)  # a fifo would block
            sf = StateFile.load(resume)
            _check_beside_resume(model, sf)
            _configurations(sf, redo or [])
            with _locked(sf.out_dir, sf.path, resuming=True):
                sf = StateFile.load(resume)  # re-read under the lock
                _measure_again(sf, _configurations(sf, redo or []))  # first: a --url one redone needs its password
                _apply_on_resume(sf, budget=budget, profile=profile, url=url)
                _continue(out, sf, out_dir=sf.out_dir, resumed=True)
            return
        if model is None:
            raise UsageError("peagle sweep needs MODEL (or --resume STATE)", "pass e.g. peagle sweep qwen3-coder")
        request = _request(model, modes, k, concurrency, dataset, duration, num_prompts, warmup, max_tokens, budget,
                           parallel, instance_type, role, accept_eula, ttl, provision_estimate, logs_wait, timeout,
                           url, region, profile, trust_labels, hosting)
        request = request.model_copy(update={"agreement_prompts": agreement_prompts,
                                             "drafter": _dflash_drafter(request, drafter, dry_run)})
        state_path = state or out_dir / STATE_NAME
        if dry_run:
            _start(out, request, dry_run=True, state_path=state_path, out_dir=out_dir, yes=yes)
            return
        with tidy_new_dirs(out_dir, state_path.parent):  # a refused sweep leaves no empty --out (nor lock file)
            probe_writable(out_dir, flag="--out")  # a file named by --out, or a folder peagle cannot write: one line
            probe_writable(state_path.parent, flag="--state")
            check_file_path(state_path, flag="--state", must_exist=False, example=STATE_NAME)
            with _locked(out_dir, state_path, resuming=False):
                _start(out, request, dry_run=False, state_path=state_path, out_dir=out_dir, yes=yes)

    run(json_output, body)


# options a --resume takes from the state file; --budget and --profile may change, and --url may come again with
# the credentials the state file does not keep (sweep/config.restore_url_credentials)
_FROM_STATE = ("modes", "k", "drafter", "concurrency", "dataset", "duration", "num_prompts", "warmup", "max_tokens", "parallel",
               "instance_type", "role", "accept_eula", "ttl", "provision_estimate", "logs_wait", "timeout",
               "agreement_prompts", "trust_labels", "dry_run", "state", "out_dir", "region", "hosting")


def _check_beside_resume(model: str | None, sf) -> None:
    """MODEL beside --resume must be the sweep's; options the state file fixes are refused, never ignored."""
    from ..errors import UsageError
    from .common import given_flags

    request = sf.state.request
    if model is not None and model != request.model:
        raise UsageError(f"MODEL {model!r} is not the model of sweep {request.sweep_id} ({request.model!r})",
                         f"drop MODEL: 'peagle sweep --resume {sf.path}' continues the sweep of {request.model}")
    typed = given_flags()
    fixed = [typed[name] for name in _FROM_STATE if name in typed]
    if fixed:
        raise UsageError(f"{', '.join(fixed)} cannot change on --resume: the state file fixes "
                         f"{'it' if len(fixed) == 1 else 'them'}",
                         f"drop {', '.join(fixed)} (run 'peagle sweep --resume {sf.path}'), or start a new sweep "
                         "with another --out")


def _locked(out_dir: Path, state_path: Path, *, resuming: bool):
    """One sweep at a time per --out folder and per state file (locks.hold: the second is refused in one line)."""
    from contextlib import ExitStack

    from ..locks import hold

    what = f"running a sweep with --out {out_dir}"
    hint = ("wait for it to finish (it is running this sweep), or stop it first" if resuming
            else "wait for it to finish, or pass another --out")
    stack = ExitStack()
    stack.enter_context(hold(Path(out_dir) / ".peagle-sweep.lock", what, hint=hint))
    if Path(state_path).parent.absolute() != Path(out_dir).absolute():
        stack.enter_context(hold(Path(state_path).parent / f".{Path(state_path).name}.lock",
                                 f"running a sweep with --state {state_path}", hint=hint))
    return stack


def _apply_on_resume(sf, *, budget: float | None, profile: str | None, url: list[str] | None = None) -> None:
    import os

    from ..errors import UsageError
    from ..sweep.config import restore_url_credentials

    state = sf.state
    state.request = restore_url_credentials(state.request, {label for label, c in state.configs.items() if c.measured},
                                            url, dict(os.environ), sf.path)
    changes = {}
    if budget is not None:
        if not budget > 0:
            raise UsageError(f"--budget must be positive, got {budget:g}", "pass the dollars the sweep may spend")
        changes["budget_usd"] = budget
    if profile is not None:
        changes["profile"] = profile
    if changes:
        state.request = state.request.model_copy(update=changes)
    if budget is not None:
        estimated = state.plan.estimated_usd
        state.plan = state.plan.model_copy(update={"budget_usd": budget,
                                                   "within_budget": None if estimated is None else estimated <= budget})


def _configurations(sf, names: list[str]) -> list[str]:
    """The labels of the configurations `--redo` names (by label or short name); one line for a name that is none."""
    from ..errors import UsageError

    configs = sf.state.request.configurations
    by_name = {c.label: c.label for c in configs} | {c.slug: c.label for c in configs}
    unknown = [name for name in names if name not in by_name]
    if unknown:
        raise UsageError(f"--redo {unknown[0]!r} is not a configuration of sweep {sf.state.request.sweep_id} "
                         f"({', '.join(c.label for c in configs)}; or their short names "
                         f"{', '.join(c.slug for c in configs)})", "pass one of them")
    return list(dict.fromkeys(by_name[name] for name in names))


def _measure_again(sf, labels: list[str]) -> None:
    """--redo: these configurations are measured again (deployed, benched, torn down); what they cost stays
    counted. Their old result and outputs files stay in the state (and in the report) until a new result replaces
    them: a run that measures nothing leaves the report as it was. One whose endpoint may still exist keeps its
    status, so the resume removes that endpoint first."""
    from ..sweep.state import LIVE

    for label in labels:
        cs = sf.state.configs[label]
        sf.state.configs[label] = cs.model_copy(update={
            "status": cs.status if cs.status in LIVE else "pending", "measured": False, "error": None})


def _request(model, modes, k, concurrency, dataset, duration, num_prompts, warmup, max_tokens, budget, parallel,
             instance_type, role, accept_eula, ttl, provision_estimate, logs_wait, timeout, url, region, profile,
             trust_labels=False, hosting=None):
    from ..aws import resolve_region
    from ..bench.datasets import load_dataset
    from ..bench.runner import parse_concurrency
    from ..errors import UsageError
    from ..inputs import parse_duration
    from ..inputs import TTL_MAX
    from ..sweep.config import SweepRequest, configurations, new_sweep_id, parse_ks, parse_modes, parse_url_specs

    if budget is not None and not budget > 0:
        raise UsageError(f"--budget must be positive, got {budget:g}", "pass the dollars the sweep may spend, e.g. --budget 40")
    shape = _hosting(hosting, url=url, parallel=parallel)
    configs = parse_url_specs(url) if url else configurations(parse_modes(modes), parse_ks(k))
    if not configs:
        raise UsageError("nothing to sweep", "pass --modes off,eagle3,p-eagle,dflash")
    if instance_type and "," in instance_type:  # instance pools would let each configuration land on another type
        raise UsageError(f"--instance-type {instance_type}: a sweep runs every configuration on one instance type, "
                         "so its rows compare like with like", "pass one type, e.g. --instance-type ml.g7e.2xlarge "
                         "(docs/capacity.md#sweeps)")
    if url:  # the servers decide what is measured: a --modes or --k that says otherwise is refused, not ignored
        from .common import given_flags

        typed, served = given_flags(), ", ".join(c.label for c in configs)
        if "modes" in typed and set(parse_modes(modes)) != {c.mode for c in configs}:
            raise UsageError(f"--modes {modes} does not match the --url servers ({served})",
                             "drop --modes: with --url, each server's MODE:K says what is measured")
        if "k" in typed and set(parse_ks(k)) != {c.k for c in configs if c.k}:
            raise UsageError(f"--k {k} does not match the --url servers ({served})",
                             "drop --k: with --url, each server's MODE:K says what is measured")
    concurrency_levels = parse_concurrency(concurrency)
    ttl_s = parse_duration(ttl, flag="--ttl", maximum=TTL_MAX).total_seconds() if ttl else None
    load_dataset(dataset)  # the flags first, then the data set (a file read): exit 2 before anything is planned
    return SweepRequest(
        model=model, configurations=configs, concurrency=concurrency_levels, dataset=dataset,
        duration_s=duration, num_prompts=num_prompts, warmup=warmup, max_tokens=max_tokens, budget_usd=budget,
        parallel=parallel, instance_type=instance_type, region=resolve_region(region), profile=profile, role=role,
        accept_eula=accept_eula, ttl_s=ttl_s,
        provision_s=provision_estimate, logs_wait_s=logs_wait, timeout_s=timeout, sweep_id=new_sweep_id(),
        trust_labels=trust_labels, hosting=shape,
    )


def _dflash_drafter(request, drafter: str | None, dry_run: bool) -> str | None:
    """The staged DFlash drafter a sweep with dflash mounts: --drafter, else the stage's record; a real sweep without
    one is refused before anything is created (a dry run shows it missing)."""
    from ..drafters import locate
    from ..errors import UsageError

    if not any(c.mode == "dflash" and not c.url for c in request.configurations):
        if drafter is not None:
            raise UsageError("--drafter is for a sweep with --modes ...,dflash", "drop --drafter, or add dflash "
                             "to --modes")
        return None
    uri, _ = locate(request.model, drafter, request.region)
    if uri is None and not dry_run:
        raise UsageError(f"--modes dflash needs the {request.model} DFlash drafter in S3",
                         f"stage it first: peagle drafter stage {request.model} --method dflash --to "
                         "s3://BUCKET/PREFIX (or pass --drafter s3://BUCKET/PREFIX)")
    return uri


def _hosting(hosting: str | None, *, url: list[str] | None, parallel: int) -> str:
    """--hosting, checked against what the component layout cannot do (one line each)."""
    from ..errors import UsageError
    from ..plan_component import parse_hosting

    shape = parse_hosting(hosting, scale_to_zero=False, idle=None)[0].value
    if shape == "component" and url:
        raise UsageError("--hosting component deploys every configuration; --url measures servers you run",
                         "drop --hosting, or drop --url")
    if shape == "component" and parallel > 1:
        raise UsageError(f"--parallel {parallel} with --hosting component: the components share one instance and "
                         "are measured one at a time", "drop --parallel (or sweep with --hosting endpoint)")
    return shape


def _start(out, request, *, dry_run, state_path: Path, out_dir: Path, yes: bool) -> None:
    from ..aws import credentials_available
    from ..errors import UsageError
    from ..sweep.estimate import budget_refusal, plan_sweep
    from ..sweep.state import ConfigState, StateFile, SweepState

    if not dry_run and not request.uses_urls:
        if request.budget_usd is None:
            raise UsageError("a sweep that deploys needs --budget", "pass the dollars it may spend, e.g. --budget 40")
        if request.role is None:
            raise UsageError("a sweep that deploys needs an execution role",
                             "pass --role arn:aws:iam::<account>:role/<name>")
    if not dry_run and state_path.exists():
        raise UsageError(f"state file {state_path} already exists",
                         f"continue it with 'peagle sweep --resume {state_path}', or pass another --state / --out")
    if not dry_run:  # before anything is deployed: the report must not go through a link planted in --out
        from ..safe_write import refuse_links
        from ..sweep.report import REPORT_FILES

        refuse_links(out_dir, REPORT_FILES)
    offline = not request.uses_urls and dry_run and not credentials_available(request.profile)
    plan, deployments = plan_sweep(request, offline=offline)
    if dry_run:
        out.result({"dry_run": True, "plan": plan}, lambda console: render_plan(console, plan))
        return
    if request.uses_urls:  # a server that contradicts its label is refused before anything is measured
        from ..sweep.runner import check_url_labels

        check_url_labels(request.configurations, out, trust_labels=request.trust_labels)
    elif (refusal := budget_refusal(plan)) is not None:  # a budget its plan could not check: nothing deploys
        raise refusal
    if plan.within_budget is False:
        raise UsageError(f"the sweep is estimated at ${plan.estimated_usd:,.2f}, over --budget "
                         f"${request.budget_usd:,.2f}", "raise --budget, or sweep fewer modes, K or levels "
                         "(see --dry-run)")
    if not out.json_mode:
        render_plan(out.err_console, plan)
    what = f"{len(plan.configurations)} configuration(s)"
    if request.uses_urls:
        out.confirm(f"Benchmark {what} at the given URLs?", yes=True)
    elif plan.layout is not None:
        out.confirm(f"Deploy one {plan.layout.instance_type} endpoint and {what} as its inference components, "
                    f"measured one at a time, about ${plan.estimated_usd:,.2f} of ${request.budget_usd:,.2f}?", yes=yes)
    else:
        out.confirm(f"Deploy {what} one after another ({request.parallel} at once), about "
                    f"${plan.estimated_usd:,.2f} of ${request.budget_usd:,.2f}?", yes=yes)
    sf = StateFile(state_path, SweepState(request=request, plan=plan,
                                          configs={c.label: ConfigState(label=c.label) for c in plan.configurations}))
    sf.set_out_dir(out_dir)  # stored relative to the state file: a copied sweep folder resumes from anywhere
    _continue(out, sf, out_dir=sf.out_dir, resumed=False, deployments=deployments)


def _continue(out, sf, *, out_dir: Path, resumed: bool, deployments: dict | None = None) -> None:
    from ..aws import AwsSession
    from ..errors import PeagleError
    from ..sweep.estimate import plan_sweep
    from ..sweep.runner import Sweep, check_lanes

    request = sf.state.request
    if resumed:
        _check_results_present(sf)
    session, lanes = None, request.parallel
    if not request.uses_urls:
        session = AwsSession(request.region, request.profile)
        session.check_credentials()
        layout = sf.state.plan.layout
        if not deployments:  # on --resume: the same names, tags and TTLs, from the stored request
            plan, deployments = plan_sweep(request, offline=False)
            layout = plan.layout
        first = next(iter(deployments.values()))
        lanes, note = check_lanes(session, first.instance_type, 1 if layout else first.instance_count,
                                  request.parallel)
        out.note(note)
    if request.hosting == "component":
        from ..sweep.component_runner import ComponentSweep

        sweep = ComponentSweep(sf, out, out_dir, session=session, deployments=deployments, layout=layout)
    else:
        sweep = Sweep(sf, out, out_dir, session=session, deployments=deployments)
    if resumed:
        removed = sweep.resume_leftovers()
        done = [c.label for c in sf.state.configs.values() if c.status == "done"]
        budget = f" under --budget ${request.budget_usd:,.2f}" if request.budget_usd is not None else ""
        out.note(f"resuming sweep {request.sweep_id}{budget}: {len(done)} configuration(s) done"
                 + (f", removed {', '.join(removed)} left by the earlier run" if removed else ""))
    else:
        sf.save()
    results_before = {label: cs.result_file for label, cs in sf.state.configs.items()}
    failure: BaseException | None = None
    try:
        sweep.run(lanes)
    except PeagleError as exc:
        failure = exc
    measured = any(cs.measured and cs.result_file != results_before.get(label)
                   for label, cs in sf.state.configs.items())
    keep = not measured and _report_exists(out_dir)  # a run that measured nothing leaves the report as it was
    report = _report(sf, out_dir, write=not keep)
    if keep:
        out.note(f"the report in {out_dir} is left as it was: nothing was measured")
    for warning in report.warnings if report is not None and not keep else []:
        out.warn(warning)
    if failure is not None:
        if report is not None and not keep:
            out.note(f"partial report: {', '.join(report.files)}")
        raise failure

    def human(console):
        from ..sweep.report import render

        render(console, report)

    out.result({"report": report, "state": str(sf.path)}, human)


def _check_results_present(sf) -> None:
    """A measured configuration whose result file is gone or damaged would turn into '-' cells in a rewritten report
    (or stop it): refuse (nothing is run or written), say which file, and the --redo that measures it again."""
    from ..bench.results import read_result
    from ..errors import UsageError

    slugs = {c.label: c.slug for c in sf.state.request.configurations}
    for label, cs in sf.state.configs.items():
        if not cs.result_file or not (cs.status == "done" or cs.measured):
            continue
        path = sf.resolve(cs.result_file)
        fix = f"re-measure it with 'peagle sweep --resume {sf.path} --redo {slugs.get(label, label)}', or restore the file"
        if not path.exists():
            raise UsageError(f"the result of {label} ({path}) is missing, so resuming would lose its figures", fix)
        try:
            read_result(path)
        except UsageError as exc:
            raise UsageError(f"the result of {label} ({path}) cannot be read ({exc.message})", fix) from None


def _report_exists(out_dir: Path) -> bool:
    from ..sweep.report import REPORT_FILES

    return any((Path(out_dir) / name).exists() for name in REPORT_FILES)


def _report(sf, out_dir: Path, *, write: bool = True):
    """The report of every result in the state (written to `out_dir` unless `write` is false). A result file that
    cannot be read any more (one `--redo` is measuring again) is left out, as a missing one is."""
    from ..bench.results import read_result
    from ..errors import UsageError
    from ..sweep.report import build_report, write_report

    results = {}
    for label, cs in sf.state.configs.items():
        if cs.result_file and sf.resolve(cs.result_file).exists():
            try:
                result = read_result(sf.resolve(cs.result_file))
            except UsageError:
                continue
            if result.target.model is None:  # a --url server that did not name its model: the sweep's MODEL
                result = result.model_copy(update={"target": result.target.model_copy(
                    update={"model": sf.state.request.model})})
            results[label] = result
    report = build_report(sf.state, results, base=sf.path.parent)
    if write:
        write_report(report, out_dir)
    else:
        from ..sweep.report import REPORT_FILES

        report.files = [str(Path(out_dir) / name) for name in REPORT_FILES if (Path(out_dir) / name).exists()]
    return report


def render_plan(console, plan) -> None:
    from ..inputs import format_duration
    from ..output import print_table

    if plan.layout is not None:
        _render_layout(console, plan)
        return
    rows = []
    for c in plan.configurations:
        unknown = c.price_per_hour_usd is None and c.instance_type
        price = "unknown" if unknown else "-" if c.price_per_hour_usd is None else f"{c.price_per_hour_usd:,.2f}"
        rows.append([c.label, c.endpoint, c.instance_type or "-", price, format_duration(c.estimated_s),
                     "?" if c.estimated_usd is None else f"{c.estimated_usd:,.2f}"])
    print_table(console, ["configuration", "endpoint", "instance", "$/h", "est. time", "est. $"], rows,
                title=f"sweep {plan.sweep_id} of {plan.model} ({plan.target}): the plan")
    console.print(f"{_total(plan)} ({_budget(plan)}), about {format_duration(plan.estimated_wall_s)} with "
                  f"{plan.parallel} at once; concurrency {','.join(map(str, plan.concurrency))}", markup=False,
                  soft_wrap=True)
    for note in plan.notes:
        console.print(f"note: {note}", markup=False, soft_wrap=True)


def _render_layout(console, plan) -> None:
    """--hosting component: the one endpoint, each component's body summary, and both layouts' estimates."""
    from ..inputs import format_duration
    from ..output import print_table
    from ..speculative import drafter_channel, parse_mode

    layout, classic = plan.layout, plan.classic
    hourly = "price unknown" if layout.price_per_hour_usd is None else f"${layout.price_per_hour_usd:,.2f}/h"
    console.print(f"sweep {plan.sweep_id} of {plan.model} (sagemaker, inference components): one endpoint "
                  f"{layout.endpoint} on {layout.instance_type} ({layout.gpus} GPUs, {hourly}): {layout.choice}",
                  markup=False, soft_wrap=True)
    rows = [[c.label, c.component, str(c.batch), f"{c.accelerators:g}", f"{c.memory_mb}", str(c.copies),
             _speculative(c.speculative_config),
             (drafter_channel(parse_mode(c.label.split()[0])) or "-") if c.drafter_channel else "-"]
            for c in layout.components]
    print_table(console, ["configuration", "inference component (and model)", "batch", "GPUs", "memory MB", "copies",
                          "SM_VLLM_SPECULATIVE_CONFIG", "drafter channel"], rows,
                title="one component per configuration, measured one at a time (--json: every body)")
    print_table(console, ["layout", "instances", "est. time", "est. $"], [
        ["components (this sweep)", f"1 x {layout.instance_type}", format_duration(layout.estimated_s),
         "?" if layout.estimated_usd is None else f"{layout.estimated_usd:,.2f}"],
        ["classic: one endpoint per configuration", f"{len(classic.configurations)} x {classic.instance_type}",
         format_duration(classic.estimated_s),
         "?" if classic.estimated_usd is None else f"{classic.estimated_usd:,.2f}"]],
        title="estimates side by side")
    if layout.estimated_usd is None or classic.estimated_usd is None:
        than = "the prices are unknown, so the layouts are not compared in dollars"
    else:
        difference = layout.estimated_usd - classic.estimated_usd
        than = f"${abs(difference):,.2f} {'more' if difference > 0 else 'less'} than the classic layout"
    console.print(f"{_total(plan)} ({_budget(plan)}; {than}), about {format_duration(plan.estimated_wall_s)}; "
                  f"concurrency {','.join(map(str, plan.concurrency))}", markup=False, soft_wrap=True)
    for note in plan.notes:
        console.print(f"note: {note}", markup=False, soft_wrap=True)


def _total(plan) -> str:
    return "total unknown" if plan.estimated_usd is None else f"total about ${plan.estimated_usd:,.2f}"


def _budget(plan) -> str:
    """What the plan says of --budget: none, within or over it, or not checked and why (an unknown price)."""
    if plan.budget_usd is None:
        return "no --budget" + (f"; {plan.price_unknown}" if plan.price_unknown else "")
    if plan.within_budget is None:
        fix = f": {plan.price_fix}, docs/configuration.md#prices" if plan.price_fix else ""
        return f"--budget ${plan.budget_usd:,.2f} not checked: {plan.price_unknown}{fix}"
    return f"{'within' if plan.within_budget else 'OVER'} --budget ${plan.budget_usd:,.2f}"


def _speculative(config: str | None) -> str:
    """The model's SM_VLLM_SPECULATIVE_CONFIG in a table cell: its settings but the drafter's path."""
    import json

    if config is None:
        return "- (no speculation)"
    values = json.loads(config)
    return " ".join(f"{key}={json.dumps(value)}" for key, value in values.items() if key != "model")
