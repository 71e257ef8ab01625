"""`peagle local`: run the endpoint's container environment on this machine before paying for SageMaker."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from .common import JsonOpt, run

local_app = typer.Typer(help="Run the SageMaker container environment on this machine (vLLM + P-EAGLE), "
                             "then invoke, bench and metrics against it.", no_args_is_help=True)

NameOpt = Annotated[str, typer.Option("--name", help="Server name (several can run on different ports).")]


def register(app: typer.Typer) -> None:
    app.add_typer(local_app, name="local")


@local_app.command("start")
def start(
    model_dir: Annotated[Path, typer.Argument(help="Local directory with the target model (SageMaker's /opt/ml/model).")],
    drafter: Annotated[Path | None, typer.Option("--drafter", help="Local directory with the P-EAGLE / EAGLE-3 "
                                                 "drafter (the 'eagle' channel).")] = None,
    model: Annotated[str | None, typer.Option("--model", help="Alias whose deployment plan environment to run "
                                              "(see `peagle models`).")] = None,
    mode: Annotated[str, typer.Option(help="p-eagle (parallel drafting), eagle3 (sequential), dflash (a DFlash drafter) or off.")] = "p-eagle",
    k: Annotated[str | None, typer.Option("--k", help="Speculative tokens per step (default: the model's, else 3).")] = None,
    env: Annotated[list[str] | None, typer.Option("--env", help="Extra container env KEY=VALUE (repeatable); "
        "SM_VLLM_SPECULATIVE_CONFIG='{...}' adds vLLM keys to the speculative config.")] = None,
    allow_lossy: Annotated[bool, typer.Option(
        "--allow-lossy", help="Run a lossy rejection_sample_method (fly, synthetic) given in "
                              "SM_VLLM_SPECULATIVE_CONFIG instead of refusing it.")] = False,
    port: Annotated[int, typer.Option(help="Port on 127.0.0.1 (SageMaker uses 8080).", min=1, max=65535)] = 8080,
    name: NameOpt = "default",
    timeout: Annotated[int, typer.Option(help="Seconds to wait for /ping.", min=1)] = 1800,
    docker: Annotated[bool, typer.Option("--docker", help="Run the image in a container engine, Docker or Podman "
                                         "(mounts at /opt/ml/..., `IMAGE serve`).")] = False,
    engine: Annotated[str | None, typer.Option("--engine", help="docker or podman (implies --docker; default: "
                                               "$PEAGLE_ENGINE, else the first on PATH that answers).")] = None,
    engine_options: Annotated[str | None, typer.Option(
        "--engine-options", help="Engine settings as on its command line: 'GLOBAL... run RUN...' (default: "
        "$PEAGLE_ENGINE_OPTIONS; see docs/local.md).")] = None,
    image: Annotated[str | None, typer.Option(help="Image for --docker (default: the plan's image).")] = None,
    gpus: Annotated[str, typer.Option(help="GPUs for --docker: all, device=0,1 (Docker: also a count) or none; "
                                      "Podman gets them as CDI devices.")] = "all",
    dry_run: Annotated[bool, typer.Option(help="Print the environment and the command; start nothing.")] = False,
    json_output: JsonOpt = False,
) -> None:
    """Start the bundled entrypoint (vLLM) with the deployment plan's container environment, detached."""

    def body(out):
        from ..inputs import parse_env
        from ..local import environment as env_mod
        from ..local import runner
        from ..speculative import parse_mode_with_k

        container = env_mod.build_environment(model_dir, drafter, alias=model, mode=parse_mode_with_k(mode, k), k=k,
                                              env=parse_env(env or []), allow_lossy=allow_lossy)
        from ..local import engine as engine_mod

        image_uri = image or container.image
        in_container = docker or engine is not None or engine_options is not None
        if in_container and image_uri is None:
            from ..errors import UsageError

            raise UsageError("--docker needs an image", "pass --image (e.g. peagle-vllm) or --model ALIAS")
        if dry_run:
            chosen = engine_mod.named_engine(engine, engine_options) if in_container else None
            _dry_run(out, container, port=port, name=name, engine=chosen, image=image_uri, gpus=gpus)
            return
        chosen = engine_mod.find_engine(engine, engine_options) if in_container else None
        from ..local import state as local_state

        with local_state.lock(name, "starting"):  # a second start (or a stop) of this name is refused meanwhile
            runner.preflight(container, name=name, port=port, engine=chosen)  # refusals: one line, nothing printed
            visible, why = runner.gpu_visible()
            if chosen is None and not visible:  # said before a start that may take minutes and then fail
                out.note(f"no GPU is visible here ({why}): vLLM runs on the CPU only as its CPU build "
                         "(docs/vllm-cpu.md); a GPU build stops at start-up")
            with out.status(f"starting local server {name}") as update:
                def progress(elapsed, last_line):
                    # vLLM's latest line on a terminal; off one (a CI log) only the seconds: no copy of the log
                    update(f"vLLM starting ({int(elapsed)}s)" + (f": {last_line[-100:]}" if out.interactive else ""))

                if chosen is not None:
                    started = runner.start_container(container, name=name, port=port, image=image_uri,
                                                     engine=chosen, timeout_s=timeout,
                                                     gpus=None if gpus == "none" else gpus, on_progress=progress)
                else:
                    started = runner.start(container, name=name, port=port, timeout_s=timeout, on_progress=progress)
        for warning in started.startup.warnings:
            out.warn(warning)
        check = _startup_check(started.server, started.startup)

        def human(console):
            server = started.server
            console.print(f"[bold]{server.name}[/bold] answers on {server.url} after {int(started.elapsed_s)}s "
                          f"({server.mode}" + (f", K={server.k})" if server.k else ")"), soft_wrap=True)
            console.print(f"  environment: {container.source}", markup=False, soft_wrap=True)
            console.print(f"  vLLM start-up: {check.line()}", markup=False, soft_wrap=True)
            console.print(f"  log: {server.log_path}", markup=False, soft_wrap=True)
            console.print(f"  try: peagle invoke {server.url} \"Write a Python quicksort\"", markup=False, soft_wrap=True)
            console.print(f"       peagle bench run {server.url} --mode {server.mode}"
                          + (f" --k {server.k}" if server.k else ""), markup=False, soft_wrap=True)
            console.print(f"       peagle metrics {server.url} --window 0s", markup=False, soft_wrap=True)
            console.print(f"  stop: peagle local stop --name {server.name}", markup=False, soft_wrap=True)

        out.result({"local": started.server, "startup": started.startup, "startup_check": check,
                    "elapsed_s": started.elapsed_s}, human)

    run(json_output, body)


def _dry_run(out, container, *, port, name, engine, image, gpus) -> None:
    import shlex

    from ..local import engine as engine_mod
    from ..local import runner

    if engine is not None:
        run = engine_mod.run_command(engine, image, container.environment, container.mounts, port=port,
                                     container=engine_mod.container_name(name), gpus=None if gpus == "none" else gpus)
        command, environment = run.argv, run.env  # `--env KEY`: the values come from the environment above
    else:
        environment, command = runner.plan_command(container, port=port)

    from ..redaction import mask_argv, mask_env, register_secret_env

    register_secret_env(dict(environment))  # shown by name, never by value (as deploy --dry-run)
    environment, command = mask_env(dict(environment)), mask_argv(command)

    def human(console):
        console.print(f"environment ({container.source}):", markup=False, soft_wrap=True)
        for key in sorted(environment):
            console.print(f"  {key}={environment[key]}", markup=False, soft_wrap=True)
        if engine is not None:
            console.print("(each --env KEY takes its value from the environment above, as peagle passes it)",
                          markup=False, soft_wrap=True)
        console.print(shlex.join(command), markup=False, soft_wrap=True)

    out.result({"dry_run": True, "environment": environment, "command": command, "source": container.source}, human)


@local_app.command("stop")
def stop(name: NameOpt = "default", json_output: JsonOpt = False) -> None:
    """Stop a local server (vLLM and its engine processes) and forget it."""

    def body(out):
        from ..errors import UsageError
        from ..local import runner, state

        server = None
        if state.load(name) is not None:
            with state.lock(name, "stopping"):
                server = runner.stop(name)
        if server is None:  # a named thing that is not there: nothing was done (docs/cli.md), exit 2
            raise UsageError(f"no local server named {name!r}", "nothing was stopped; see peagle local status")

        def human(console):
            console.print(f"stopped {name} ({server.url})", markup=False)

        out.result({"stopped": True, "name": name}, human)

    run(json_output, body)


@local_app.command("status")
def status(name: Annotated[str | None, typer.Option("--name", help="One server (default: all).")] = None,
           json_output: JsonOpt = False) -> None:
    """Local servers peagle started: running, healthy, and what vLLM said at start-up."""

    def body(out):
        from ..local import runner, state

        rows = [r for r in (runner.status(n) for n in ([name] if name else state.names())) if r is not None]
        if name and not rows:  # asked about one by name: nothing to show is exit 2, as local logs and stop
            from ..errors import UsageError

            raise UsageError(f"no local server named {name!r}", "see peagle local status")
        for row in rows:
            for warning in (row.startup.warnings if row.startup else []):
                out.warn(f"{row.server.name}: {warning}")

        def human(console):
            if not rows:
                console.print("no local servers")
            for row in rows:
                health = "healthy" if row.healthy else ("running, not answering /ping" if row.running else "stopped")
                console.print(f"{row.server.name}: {row.server.url} {health} ({row.server.mode}"
                              + (f", K={row.server.k})" if row.server.k else ")"), markup=False, soft_wrap=True)
                if row.startup is not None:
                    console.print(f"  vLLM start-up: {_startup_check(row.server, row.startup).line()}",
                                  markup=False, soft_wrap=True)
                if row.failure:
                    console.print(f"  last error: {row.failure}", markup=False, soft_wrap=True)

        out.result({"servers": [{**row.model_dump(mode="json"), "startup_check": _startup_check(
            row.server, row.startup).model_dump(mode="json") if row.startup else None} for row in rows]}, human)

    run(json_output, body)


@local_app.command("logs")
def logs(name: NameOpt = "default",
         lines: Annotated[int, typer.Option("--lines", "-n", min=1, help="How many of the last lines.")] = 50,
         json_output: JsonOpt = False) -> None:
    """The last lines of a local server's output (vLLM's log)."""

    def body(out):
        from ..local import runner

        found = runner.log_lines(name, lines)

        def human(console):
            for line in found:
                console.print(line, markup=False, highlight=False, soft_wrap=True)

        out.result({"name": name, "lines": found}, human)

    run(json_output, body)


def _startup_check(server, startup):
    """vLLM's logged speculative config against the one the server was started with (three outcomes)."""
    import json

    from ..lifecycle.verify import BY_HAND_PATTERN, startup_check

    expected = json.loads(server.speculative_config) if server.speculative_config else None
    how = (f"docker logs {server.container_id[:12]}" if server.container_id else
           f"peagle local logs --name {server.name} --lines 100000") + f" | grep -iE '{BY_HAND_PATTERN}'"
    return startup_check(startup, expected, how_to_check=how)
