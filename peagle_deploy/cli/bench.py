"""`peagle bench TARGET` (a run), `peagle bench compare RESULT...` and `peagle bench advise`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from typer.core import TyperGroup

from .common import ComponentOpt, JsonOpt, ProfileOpt, RegionOpt, WaitTimeoutOpt, run


class _BenchGroup(TyperGroup):
    """`peagle bench TARGET ...` runs a benchmark: anything that is not a subcommand means `run`."""

    def parse_args(self, ctx, args):  # noqa: ANN001 - Click's signature
        if args and args[0] not in self.commands and not args[0].startswith("-"):
            args = ["run", *args]
        return super().parse_args(ctx, args)


bench_app = typer.Typer(
    cls=_BenchGroup,
    no_args_is_help=True,
    rich_markup_mode="rich",
    help="Benchmark a target: 'peagle bench TARGET \\[options]' (same as 'peagle bench run'), compare runs, advise K.",
)


def register(app: typer.Typer) -> None:
    app.add_typer(bench_app, name="bench")


@bench_app.command("run")
def bench_run(
    target: Annotated[
        str,
        typer.Argument(
            help="SageMaker endpoint name (or its OpenAI route URL), container URL (http://host:8080) or OpenAI "
                 "URL (http://host:8000/v1)."
        ),
    ],
    concurrency: Annotated[
        str, typer.Option("--concurrency", "-c", help="Requests in flight, one level each, comma-separated.")
    ] = "1,4,8,32,128",
    dataset: Annotated[
        str,
        typer.Option(
            "--dataset", "-d", help='humaneval or mt-bench (the published sets, fetched on first use: '
            "see 'peagle datasets'), the look-alikes humaneval-like, code, chat, or a JSONL file of "
            '{"prompt"} / {"messages"} lines.'
        ),
    ] = "humaneval",
    num_prompts: Annotated[
        int | None, typer.Option("--num-prompts", "-n", min=1, help="Measured requests per level (after warm-up).")
    ] = None,
    duration: Annotated[
        float | None,
        typer.Option(
            "--duration", min=0.1, help="Seconds measured per level (after warm-up). Default 60 unless --num-prompts."
        ),
    ] = None,
    max_tokens: Annotated[int, typer.Option("--max-tokens", min=1, help="max_tokens of each request.")] = 256,
    temperature: Annotated[
        float, typer.Option("--temperature", min=0.0, help="Sampling temperature (0: greedy, as the published runs).")
    ] = 0.0,
    warmup: Annotated[
        int | None,
        typer.Option(
            "--warmup", min=0, help="Warm-up requests per level, not measured. Default: the level's concurrency."
        ),
    ] = None,
    out_dir: Annotated[
        Path, typer.Option("--out", "-o", help="Folder for the results JSON, Markdown summary and PNG chart.")
    ] = Path("peagle-bench"),
    mode: Annotated[
        str | None,
        typer.Option("--mode", help="Label: p-eagle, eagle3, dflash or off (default: the endpoint's peagle:mode tag)."),
    ] = None,
    k: Annotated[
        int | None,
        typer.Option("--k", min=1, help="Label: speculative tokens K (default: the endpoint's peagle:k tag)."),
    ] = None,
    instance_type: Annotated[
        str | None, typer.Option("--instance-type", help="Instance type, for cost, when the target is a URL.")
    ] = None,
    model: Annotated[
        str | None,
        typer.Option("--model", help="Model name sent to an OpenAI server (default: the first of /v1/models)."),
    ] = None,
    timeout: Annotated[
        float,
        typer.Option("--timeout", min=1.0, help="Seconds before one request is abandoned (a level with no data "
                     "for min(this, max(30, --duration)) seconds stops)."),
    ] = 600.0,
    logs_wait: Annotated[
        float,
        typer.Option("--logs-wait", min=0, help="Seconds to wait for an endpoint's acceptance lines in CloudWatch "
                     "Logs after the run (they lag behind)."),
    ] = 60.0,
    no_chart: Annotated[bool, typer.Option("--no-chart", help="Do not write the PNG chart.")] = False,
    transport: Annotated[
        str | None,
        typer.Option("--transport", help="A SageMaker endpoint's transport: invoke-endpoint (InvokeEndpoint"
                     "WithResponseStream, the default), openai-route (its OpenAI-compatible route, a bearer token "
                     "made on the fly), or both: the two side by side, level by level, in one run."),
    ] = None,
    save_requests: Annotated[
        Path | None,
        typer.Option("--save-requests", help="Also write every finished request as a JSON line to this file "
                     "(streamed to disk as the run goes, like vllm bench serve --save-detailed)."),
    ] = None,
    component: ComponentOpt = None,
    wait_timeout: WaitTimeoutOpt = "15m",
    region: RegionOpt = None,
    profile: ProfileOpt = None,
    json_output: JsonOpt = False,
) -> None:
    """Closed-loop load at each concurrency: output tokens/s, requests/s, TTFT, ITL, TPOT, E2E, errors, acceptance, cost.

    An endpoint that hosts an inference component is measured through it, once a copy serves: one at zero copies
    is woken first (at most --wait-timeout), and its cold start is reported apart, in no figure.
    """

    def body(out):
        from ..bench.datasets import load_dataset
        from ..bench.runner import BenchPlan, parse_concurrency, run_bench
        from ..errors import UsageError
        from ..safe_write import tidy_new_dirs

        from ..speculative import parse_mode_with_k

        mode_ = parse_mode_with_k(mode, k).value if mode is not None else None
        if k is not None and mode is None:
            raise UsageError("--k needs --mode", "pass --mode p-eagle or --mode eagle3 with --k")
        if instance_type and "," in instance_type:  # the price of a URL target is one type's
            raise UsageError(f"--instance-type {instance_type}: bench prices one instance type",
                             "pass the type the server runs on, e.g. --instance-type ml.g7e.2xlarge")
        from ..runtime.target_ref import TRANSPORTS, parse_target

        from ..inputs import parse_duration

        # bad input: exit 2 first; --transport both benches each of an endpoint's transports (a URL is refused)
        ref = parse_target(target, transport=TRANSPORTS[0] if transport == "both" else transport)
        wait_s = parse_duration(wait_timeout, flag="--wait-timeout").total_seconds()
        with out.status(f"reading --dataset {dataset}") as show:
            data = load_dataset(dataset, progress=show)
        plan = BenchPlan(
            target=ref,
            dataset=data,
            concurrency=parse_concurrency(concurrency),
            max_tokens=max_tokens,
            temperature=temperature,
            warmup=warmup,
            duration=duration if duration is not None or num_prompts is not None else 60.0,
            num_prompts=num_prompts,
            out_dir=out_dir,
            mode=mode_,
            k=None if mode_ == "off" else k,
            instance_type=instance_type,
            model=model,
            region=region,
            profile=profile,
            timeout=timeout,
            logs_wait=logs_wait,
            chart=not no_chart,
            save_requests=save_requests,
            wait_timeout=wait_s,
        )
        if transport == "both" and save_requests is not None:
            raise UsageError("--save-requests writes one run's requests; --transport both makes two",
                             "bench one transport at a time to save its requests")
        session = None
        if ref.kind == "sagemaker":
            from ..aws import AwsSession

            session = AwsSession(ref.session_region(region), profile)
        from ..lifecycle.component_target import address_component

        plan.target = address_component(ref, session, component, note=out.note)  # once: the plan carries it
        if transport == "both":
            from ..bench.transports import render, run_side_by_side

            with tidy_new_dirs(out_dir):
                comparison, failure = run_side_by_side(plan, out)
            out.result(comparison, lambda console: render(console, comparison))
            if failure is not None:
                raise failure
            return
        with tidy_new_dirs(out_dir):  # a refused or failed run leaves no empty --out
            bench = run_bench(plan, out)
        result = bench.result

        def human(console):
            from ..bench.report import render_result

            render_result(console, result, bench.files)

        out.result({"result": result, "files": bench.files}, human)
        if bench.failure is not None:
            raise bench.failure

    run(json_output, body)


@bench_app.command("compare")
def bench_compare(
    results: Annotated[list[Path] | None, typer.Argument(help="Results JSON files written by 'peagle bench'.")] = None,
    published: Annotated[
        str | None, typer.Option("--published", help="Also show published figures: 'aws-blog' (shipped) or a CSV path.")
    ] = None,
    out_dir: Annotated[
        Path | None, typer.Option("--out", "-o", help="Also write compare.md and compare.png here.")
    ] = None,
    json_output: JsonOpt = False,
) -> None:
    """Runs side by side (P-EAGLE vs EAGLE-3 vs off, by K) with speed-ups, like the published tables."""

    def body(out):
        from ..bench.compare import compare_results, compare_warnings, published_matching, read_published
        from ..bench.results import read_results

        from ..errors import UsageError

        if not results and published is None:
            raise UsageError("nothing to compare", "pass results JSON files and/or --published aws-blog")
        if out_dir is not None:
            from ..safe_write import probe_writable, refuse_links

            probe_writable(out_dir, flag="--out")  # a file named by --out: one line, before any work
            refuse_links(out_dir, ["compare.md", "compare.png"])
        tables = compare_results(read_results(results or [], skipped=out.note))
        reference = []
        if published is not None:
            reference, unmatched = published_matching(
                tables, read_published(None if published == "aws-blog" else Path(published)))
            for note in unmatched:
                out.note(note)
        for warning in compare_warnings(tables):  # like with like only: say what was kept apart, and why
            out.warn(warning)
        files = []
        if out_dir is not None:
            from ..bench.plot import plot_tables
            from ..bench.report import compare_markdown

            from ..safe_write import write_text

            md = write_text(out_dir / "compare.md", compare_markdown(tables + reference))
            files.append(str(md))
            png = plot_tables(tables + reference, out_dir / "compare.png")
            if png is not None:
                files.append(str(png))

        def human(console):
            from ..bench.report import render_compare

            render_compare(console, tables + reference)
            for f in files:
                console.print(f"wrote {f}")

        out.result({"tables": tables, "published": reference, "files": files}, human)

    run(json_output, body)


@bench_app.command("advise")
def bench_advise(
    result: Annotated[Path | None, typer.Argument(help="A results JSON with acceptance data (or use --rates).")] = None,
    rates: Annotated[
        str | None, typer.Option("--rates", help="Per-position acceptance rates, comma-separated, e.g. 0.85,0.70,0.56.")
    ] = None,
    conditional: Annotated[
        bool, typer.Option("--conditional", help="--rates are conditional (default: cumulative, as vLLM logs them).")
    ] = False,
    mode: Annotated[str | None, typer.Option("--mode", help="p-eagle or dflash (one drafter pass) or eagle3 (K "
                                                   "passes); default: the mode of RESULT, else p-eagle.")] = None,
    max_k: Annotated[
        int | None,
        typer.Option("--max-k", min=1, max=32, help="Largest K to consider (default: the measured positions)."),
    ] = None,
    verify_cost: Annotated[
        float,
        typer.Option(
            "--verify-cost", min=0.0, help="Extra verification cost per draft token, in target decoding steps."
        ),
    ] = 0.02,
    draft_cost: Annotated[
        float, typer.Option("--draft-cost", min=0.0, help="Cost of one drafter pass, in target decoding steps.")
    ] = 0.06,
    measured: Annotated[
        list[Path] | None,
        typer.Option("--measured", help="Results of P-EAGLE, EAGLE-3 and DFlash runs (repeatable): the mode is "
                     "taken from what they measured."),
    ] = None,
    json_output: JsonOpt = False,
) -> None:
    """Recommend K from per-position acceptance: expected tokens per step for each K, against its cost."""

    def body(out):
        from ..bench.advisor import advise, read_measured
        from ..errors import UsageError
        from ..speculative import parse_mode

        mode_ = parse_mode(mode).value if mode is not None else None
        chosen_mode = mode_
        # read first: every FILE given is read (and refused if unreadable; peagle's other files skipped)
        runs = read_measured(measured or [], skipped=out.note)
        if result is not None and rates is not None:
            raise UsageError("give a results file or --rates, not both", "drop one of them")
        if rates is not None:
            from ..inputs import read_numbers

            values = read_numbers(rates, "--rates", "0.85,0.70,0.56", whole=False)
            kind = "conditional" if conditional else "cumulative"
        elif result is not None:
            from ..bench.results import read_result

            run_result = read_result(result)
            acc = run_result.acceptance
            if acc is None or not acc.per_position:
                raise UsageError(
                    f"{result} has no per-position acceptance", "benchmark a speculative endpoint, or pass --rates"
                )
            values, kind = acc.per_position, "cumulative"
            from ..bench.compare import label_check

            if (problem := label_check(run_result)) is not None:
                out.warn(problem)
            ran = run_result.target.mode
            if mode_ is not None and ran in ("p-eagle", "eagle3", "dflash") and mode_ != ran:
                out.warn(f"--mode {mode_}, but {result} measured {ran} ({run_result.target.mode_source}): the "
                         f"estimate assumes {mode_}")
            chosen_mode = mode_ or (ran if ran in ("p-eagle", "eagle3", "dflash") else None)
        elif runs.acceptance_for(mode_ or "p-eagle") is not None:  # a --measured run's acceptance, this --mode's
            values, kind = runs.acceptance_for(mode_ or "p-eagle"), "cumulative"
        else:
            raise UsageError(
                "give a results file, --rates or a --measured run with per-position acceptance",
                "e.g. peagle bench advise --rates 0.85,0.7,0.56",
            )
        comparison = runs.comparison
        advice = advise(values, kind=kind, mode=chosen_mode or "p-eagle", max_k=max_k, verify_cost=verify_cost,
                        draft_cost=draft_cost,
                        measured=comparison)

        def human(console):
            from ..bench.report import render_advice

            render_advice(console, advice)

        out.result(advice, human)

    run(json_output, body)


def _address(ref, component: str | None, flag: str, region: str | None, profile: str | None, out):
    """An endpoint that hosts an inference component answers only requests that name it: the one it hosts (or
    `component`), read from SageMaker as `bench` reads it (lifecycle/component_target.py)."""
    from ..errors import UsageError
    from ..lifecycle.component_target import address_component

    if ref.kind != "sagemaker":
        if component is not None:
            raise UsageError(f"{flag} names an inference component of a SageMaker endpoint; {ref.name} is a server "
                             "URL", f"drop {flag}")
        return ref
    from ..aws import AwsSession

    return address_component(ref, AwsSession(ref.session_region(region), profile), component, note=out.note,
                             flag=flag)


@bench_app.command("agree")
def bench_agree(
    baseline: Annotated[str, typer.Argument(help="The target without speculation (mode off): endpoint or URL. "
                                                 "Checked first: one that speculates is refused.")],
    candidate: Annotated[str, typer.Argument(help="The speculative target to check against it: endpoint or URL.")],
    dataset: Annotated[
        str, typer.Option("--dataset", "-d", help="Prompts, as for 'peagle bench' (the first --num-prompts).")
    ] = "humaneval",
    num_prompts: Annotated[int, typer.Option("--num-prompts", "-n", min=1, help="Prompts to send.")] = 16,
    max_tokens: Annotated[int, typer.Option("--max-tokens", min=1, help="max_tokens of each request.")] = 128,
    temperature: Annotated[
        str, typer.Option("--temperature", help="Comma-separated: 0 compares greedy outputs token by token, "
                          "> 0 compares sampled output distributions (e.g. 0,1).")
    ] = "0",
    samples: Annotated[
        int, typer.Option("--samples", min=2, help="Answers per prompt and target at each temperature > 0.")
    ] = 16,
    concurrency: Annotated[int, typer.Option("--concurrency", "-c", min=1, help="Requests in flight.")] = 4,
    alpha: Annotated[
        float, typer.Option("--alpha", min=0.001, max=0.5, help="False-alarm rate of the sampled test.")
    ] = 0.01,
    noise_per_token: Annotated[
        float, typer.Option("--noise-per-token", min=0.0, max=1.0, help="Greedy divergences per token that "
                            "floating-point noise may explain (0: demand identical outputs).")
    ] = 0.01,
    allow_speculative_baseline: Annotated[
        bool, typer.Option("--allow-speculative-baseline", help="Accept a BASELINE that speculates, to compare two "
                           "speculative servers with each other (K=3 against K=7, P-EAGLE against EAGLE-3) when no "
                           "server without speculation is at hand: agreement then shows they match each other, not "
                           "that either is lossless.")
    ] = False,
    allow_same_target: Annotated[
        bool, typer.Option("--allow-same-target", help="Accept BASELINE and CANDIDATE being one target, to measure "
                           "its noise floor (run to run numerics, docs/agreement.md): not a check of speculation.")
    ] = False,
    model: Annotated[
        str | None, typer.Option("--model", help="Model name sent to OpenAI URLs (default: none).")
    ] = None,
    json_schema: Annotated[Path | None, typer.Option(
        "--json-schema", help="A JSON Schema file: every check runs again with it as the requests' response_format "
                              "(structured output, where drafts are also checked against the grammar).")] = None,
    timeout: Annotated[float, typer.Option("--timeout", min=1.0, help="Seconds per request.")] = 600.0,
    baseline_component: Annotated[str | None, typer.Option(
        "--baseline-component", help="The inference component of BASELINE to address, when it hosts several "
                                     "(default: the one it hosts, read from SageMaker).")] = None,
    candidate_component: Annotated[str | None, typer.Option(
        "--candidate-component", help="The same for CANDIDATE.")] = None,
    region: RegionOpt = None,
    profile: ProfileOpt = None,
    json_output: JsonOpt = False,
) -> None:
    """Is speculation lossless here? Same prompts to BASELINE and CANDIDATE: greedy outputs token by token,
    sampled outputs by distribution (docs/agreement.md). Exit 6 when the outputs differ beyond noise."""

    def body(out):
        import threading

        from ..bench.agreement import check_agreement, check_baseline, json_schema_format
        from ..bench.datasets import load_dataset
        from ..bench.target_info import target_facts, target_identity
        from ..errors import EndpointFailed, UsageError
        from ..runtime.target_ref import parse_target

        from ..inputs import read_numbers

        temperatures = sorted(set(read_numbers(temperature, "--temperature", "0,1", whole=False)))
        response_format = json_schema_format(json_schema) if json_schema is not None else None
        base_ref, cand_ref = parse_target(baseline), parse_target(candidate)
        same = target_identity(base_ref, region) == target_identity(cand_ref, region)
        if same and not allow_same_target:
            raise UsageError(f"BASELINE and CANDIDATE are the same target ({candidate}): a server compared with "
                             "itself says nothing about speculation",
                             "pass the target without speculation as BASELINE and the speculative one as "
                             "CANDIDATE (--allow-same-target measures one server's noise floor)")
        base_ref = _address(base_ref, baseline_component, "--baseline-component", region, profile, out)
        cand_ref = _address(cand_ref, candidate_component, "--candidate-component", region, profile, out)
        with out.status(f"reading --dataset {dataset}") as show:
            data = load_dataset(dataset, progress=show)
        prompts = data.prompts[:num_prompts]
        if len(prompts) < num_prompts:
            out.note(f"{data.name} has {len(data.prompts)} prompts: using all of them")
        base_facts = target_facts(base_ref, region=region, profile=profile)
        cand_facts = base_facts if same else target_facts(cand_ref, region=region, profile=profile)
        checked = check_baseline(baseline, candidate, base_facts, cand_facts, same_target=same,
                                 allow_speculative_baseline=allow_speculative_baseline)
        for line in checked.notes:
            out.note(line)
        requests = 2 * len(prompts) * sum(1 if t == 0 else samples for t in temperatures)
        requests *= 2 if response_format is not None else 1
        also = (f", each also with --json-schema {json_schema} as response_format" if response_format is not None
                else "")
        out.info(f"agreement: {len(prompts)} prompts from {data.source}, temperatures "
                 f"{', '.join(f'{t:g}' for t in temperatures)}{also}: {requests} requests")
        answered, lock = [0], threading.Lock()
        with out.status(f"agreement: 0/{requests} requests answered") as show:
            def one_more() -> None:  # from the request threads
                with lock:
                    answered[0] += 1
                    show(f"agreement: {answered[0]}/{requests} requests answered")

            report = check_agreement(baseline, candidate, prompts, dataset=data.name, max_tokens=max_tokens,
                                     refs=(base_ref, cand_ref),
                                     temperatures=temperatures, samples=samples, concurrency=concurrency,
                                     alpha=alpha, noise_per_token=noise_per_token, region=region, profile=profile,
                                     model=model, timeout=timeout, on_answer=one_more,
                                     response_format=response_format)
        report = report.model_copy(update={"baseline_server": base_facts, "candidate_server": cand_facts,
                                           "baseline_check": checked})
        for line in report.warnings:
            out.warn(line)

        def human(console):
            console.print(f"{candidate} against {baseline} ({report.prompts} prompts of {report.dataset}, "
                          f"max_tokens {report.max_tokens})", markup=False, soft_wrap=True, highlight=False)
            if report.greedy is not None:
                console.print(f"  temperature 0: {report.greedy.summary()}: {report.greedy.verdict}", markup=False,
                              soft_wrap=True, highlight=False)
            for s in report.sampled:
                console.print(f"  {s.summary()}", markup=False, soft_wrap=True, highlight=False)
            if (st := report.structured) is not None:
                console.print(f"  {st.summary()}", markup=False, soft_wrap=True, highlight=False)
                if st.greedy is not None:
                    console.print(f"  with the schema, temperature 0: {st.greedy.summary()}: {st.greedy.verdict}",
                                  markup=False, soft_wrap=True, highlight=False)
                for s in st.sampled:
                    console.print(f"  with the schema, {s.summary()}", markup=False, soft_wrap=True, highlight=False)
            console.print("agreement: " + ("ok" + checked.qualifier() if report.agrees else "FAILED"), markup=False,
                          soft_wrap=True, highlight=False)

        out.result(report, human)
        if not report.agrees:
            raise EndpointFailed(f"{candidate} does not reproduce {baseline}'s output",
                                 "see the warnings above and docs/agreement.md")

    run(json_output, body)
