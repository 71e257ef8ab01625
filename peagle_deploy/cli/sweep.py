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
    k: Annotated[str, typer.Option("--k", help="Speculative tokens K for eagle3 and p-eagle, comma-separated.")] = "3,7,11",
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
    dry_run: Annotated[bool, typer.Option(help="Print the plan (endpoints, time, dollars vs --budget) and stop.")] = False,
    state: Annotated[Path | None, typer.Option(help="State file (default: OUT/sweep-state.json).")] = None,
    resume: Annotated[Path | None, typer.Option(help="Continue the sweep of this state file (removes what a killed run left); with --budget, under that new budget.")] = None,
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

        if resume is not None:
            check_file_path(resume, flag="--resume", must_exist=True, example=STATE_NAME)  # a fifo would block
            sf = StateFile.load(resume)
            _check_beside_resume(model, sf)
            with _locked(sf.out_dir, sf.path, resuming=True):
                sf = StateFile.load(resume)  # re-read under the lock
                _apply_on_resume(sf, budget=budget, profile=profile, url=url)
                _continue(out, sf, out_dir=sf.out_dir, resumed=True)
            return
        if model is None:
            raise UsageError("peagle sweep needs MODEL (or --resume STATE)", "pass e.g. peagle sweep qwen3-coder")
        request = _request(model, modes, k, concurrency, dataset, duration, num_prompts, warmup, max_tokens, budget,
                           parallel, instance_type, role, accept_eula, ttl, provision_estimate, logs_wait, timeout,
                           url, region, profile, trust_labels)
        request = request.model_copy(update={"agreement_prompts": agreement_prompts})
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


# options a --resume takes from the state file; --budget and --profile may change (issue 27: --resume --budget), and
# --url may come again with the credentials the state file does not keep (sweep/config.restore_url_credentials)
_FROM_STATE = ("modes", "k", "concurrency", "dataset", "duration", "num_prompts", "warmup", "max_tokens", "parallel",
               "instance_type", "role", "accept_eula", "ttl", "provision_estimate", "logs_wait", "timeout",
               "agreement_prompts", "trust_labels", "dry_run", "state", "out_dir", "region")


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
        state.plan = state.plan.model_copy(update={"budget_usd": budget,
                                                   "within_budget": state.plan.estimated_usd <= budget})


def _request(model, modes, k, concurrency, dataset, duration, num_prompts, warmup, max_tokens, budget, parallel,
             instance_type, role, accept_eula, ttl, provision_estimate, logs_wait, timeout, url, region, profile,
             trust_labels=False):
    from ..aws import resolve_region
    from ..bench.datasets import load_dataset
    from ..bench.runner import parse_concurrency
    from ..errors import UsageError
    from ..durations import parse_duration
    from ..inputs import TTL_MAX
    from ..sweep.config import SweepRequest, configurations, new_sweep_id, parse_ks, parse_modes, parse_url_specs

    if budget is not None and not budget > 0:
        raise UsageError(f"--budget must be positive, got {budget:g}", "pass the dollars the sweep may spend, e.g. --budget 40")
    load_dataset(dataset)  # a bad data set is exit 2 before anything is planned
    configs = parse_url_specs(url) if url else configurations(parse_modes(modes), parse_ks(k))
    if not configs:
        raise UsageError("nothing to sweep", "pass --modes off,eagle3,p-eagle")
    if url:  # the servers decide what is measured: a --modes or --k that says otherwise is refused, not ignored
        from .common import given_flags

        typed, served = given_flags(), ", ".join(c.label for c in configs)
        if "modes" in typed and set(parse_modes(modes)) != {c.mode for c in configs}:
            raise UsageError(f"--modes {modes} does not match the --url servers ({served})",
                             "drop --modes: with --url, each server's MODE:K says what is measured")
        if "k" in typed and set(parse_ks(k)) != {c.k for c in configs if c.k}:
            raise UsageError(f"--k {k} does not match the --url servers ({served})",
                             "drop --k: with --url, each server's MODE:K says what is measured")
    return SweepRequest(
        model=model, configurations=configs, concurrency=parse_concurrency(concurrency), dataset=dataset,
        duration_s=duration, num_prompts=num_prompts, warmup=warmup, max_tokens=max_tokens, budget_usd=budget,
        parallel=parallel, instance_type=instance_type, region=resolve_region(region), profile=profile, role=role,
        accept_eula=accept_eula, ttl_s=parse_duration(ttl, flag="--ttl", maximum=TTL_MAX).total_seconds() if ttl else None,
        provision_s=provision_estimate, logs_wait_s=logs_wait, timeout_s=timeout, sweep_id=new_sweep_id(),
        trust_labels=trust_labels,
    )


def _start(out, request, *, dry_run, state_path: Path, out_dir: Path, yes: bool) -> None:
    from ..aws import credentials_available
    from ..errors import UsageError
    from ..sweep.estimate import plan_sweep
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
    if not plan.within_budget:
        raise UsageError(f"the sweep is estimated at ${plan.estimated_usd:,.2f}, over --budget "
                         f"${request.budget_usd:,.2f}", "raise --budget, or sweep fewer modes, K or levels "
                         "(see --dry-run)")
    if not out.json_mode:
        render_plan(out.err_console, plan)
    what = f"{len(plan.configurations)} configuration(s)"
    if request.uses_urls:
        out.confirm(f"Benchmark {what} at the given URLs?", yes=True)
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
        if not deployments:  # on --resume: the same names, tags and TTLs, from the stored request
            _, deployments = plan_sweep(request, offline=False)
        first = next(iter(deployments.values()))
        lanes, note = check_lanes(session, first.instance_type, first.instance_count, request.parallel)
        out.note(note)
    sweep = Sweep(sf, out, out_dir, session=session, deployments=deployments)
    if resumed:
        removed = sweep.resume_leftovers()
        done = [c.label for c in sf.state.configs.values() if c.status == "done"]
        budget = f" under --budget ${request.budget_usd:,.2f}" if request.budget_usd is not None else ""
        out.note(f"resuming sweep {request.sweep_id}{budget}: {len(done)} configuration(s) done"
                 + (f", removed {', '.join(removed)} left by the earlier run" if removed else ""))
    else:
        sf.save()
    failure: BaseException | None = None
    try:
        sweep.run(lanes)
    except PeagleError as exc:
        failure = exc
    report = _report(sf, out_dir)
    for warning in report.warnings if report is not None else []:
        out.warn(warning)
    if failure is not None:
        if report is not None:
            out.note(f"partial report: {', '.join(report.files)}")
        raise failure

    def human(console):
        from ..sweep.report import render

        render(console, report)

    out.result({"report": report, "state": str(sf.path)}, human)


def _check_results_present(sf) -> None:
    """A measured configuration whose result file is gone would turn into '-' cells in a rewritten report: refuse
    (nothing is run or written) and say which file is missing."""
    from ..errors import UsageError

    for label, cs in sf.state.configs.items():
        if cs.status == "done" and cs.result_file and not sf.resolve(cs.result_file).exists():
            raise UsageError(f"the result of {label} ({sf.resolve(cs.result_file)}) is missing, so resuming would "
                             "lose its figures", f"restore {cs.result_file} beside {sf.path}, then resume again")


def _report(sf, out_dir: Path):
    from ..bench.results import read_result
    from ..sweep.report import build_report, write_report

    results = {}
    for label, cs in sf.state.configs.items():
        if cs.result_file and sf.resolve(cs.result_file).exists():
            result = read_result(sf.resolve(cs.result_file))
            if result.target.model is None:  # a --url server that did not name its model: the sweep's MODEL
                result = result.model_copy(update={"target": result.target.model_copy(
                    update={"model": sf.state.request.model})})
            results[label] = result
    report = build_report(sf.state, results, base=sf.path.parent)
    write_report(report, out_dir)
    return report


def render_plan(console, plan) -> None:
    from ..durations import format_duration
    from ..output import print_table

    rows = []
    for c in plan.configurations:
        unknown = c.price_per_hour_usd is None and c.instance_type
        price = "unknown" if unknown else "-" if c.price_per_hour_usd is None else f"{c.price_per_hour_usd:,.2f}"
        rows.append([c.label, c.endpoint, c.instance_type or "-", price, format_duration(c.estimated_s),
                     "?" if unknown else f"{c.estimated_usd:,.2f}"])
    print_table(console, ["configuration", "endpoint", "instance", "$/h", "est. time", "est. $"], rows,
                title=f"sweep {plan.sweep_id} of {plan.model} ({plan.target}): the plan")
    budget = ("no --budget" if plan.budget_usd is None
              else f"{'within' if plan.within_budget else 'OVER'} --budget ${plan.budget_usd:,.2f}")
    console.print(f"total about ${plan.estimated_usd:,.2f} ({budget}), about "
                  f"{format_duration(plan.estimated_wall_s)} with {plan.parallel} at once; concurrency "
                  f"{','.join(map(str, plan.concurrency))}", markup=False, soft_wrap=True)
    for note in plan.notes:
        console.print(f"note: {note}", markup=False, soft_wrap=True)
