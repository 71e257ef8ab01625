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
    mode: Annotated[str, typer.Option(help="p-eagle (parallel drafting), eagle3 (sequential) or off.")] = "p-eagle",
    k: Annotated[str | None, typer.Option("--k", help="Speculative tokens per step (default: the model's, else 3).")] = None,
    env: Annotated[list[str] | None, typer.Option("--env", help="Extra container env KEY=VALUE (repeatable).")] = None,
    port: Annotated[int, typer.Option(help="Port on 127.0.0.1 (SageMaker uses 8080).", min=1, max=65535)] = 8080,
    name: NameOpt = "default",
    timeout: Annotated[int, typer.Option(help="Seconds to wait for /ping.", min=1)] = 1800,
    docker: Annotated[bool, typer.Option("--docker", help="Run it with Docker (mounts at /opt/ml/...).")] = False,
    image: Annotated[str | None, typer.Option(help="Image for --docker (default: the plan's image).")] = None,
    gpus: Annotated[str, typer.Option(help="--gpus value for --docker ('none' for no GPUs).")] = "all",
    dry_run: Annotated[bool, typer.Option(help="Print the environment and the command; start nothing.")] = False,
    json_output: JsonOpt = False,
) -> None:
    """Start the bundled entrypoint (vLLM) with the deployment plan's container environment, detached."""

    def body(out):
        from ..inputs import parse_env
        from ..local import environment as env_mod
        from ..local import runner
        from ..speculative import parse_mode

        container = env_mod.build_environment(model_dir, drafter, alias=model, mode=parse_mode(mode), k=k,
                                              env=parse_env(env or []))
        image_uri = image or container.image
        if dry_run:
            _dry_run(out, container, port=port, name=name, docker=docker, image=image_uri, gpus=gpus)
            return
        if docker and image_uri is None:
            from ..errors import UsageError

            raise UsageError("--docker needs an image", "pass --image (e.g. peagle-vllm) or --model ALIAS")
        from ..local import state as local_state

        with local_state.lock(name, "starting"):  # a second start (or a stop) of this name is refused meanwhile
            runner.preflight(container, name=name, port=port, docker=docker)  # refusals: one line, nothing printed
            with out.status(f"starting local server {name}") as update:
                def progress(elapsed, last_line):
                    # vLLM's latest line on a terminal; off one (a CI log) only the seconds: no copy of the log
                    update(f"vLLM starting ({int(elapsed)}s)" + (f": {last_line[-100:]}" if out.interactive else ""))

                if docker:
                    started = runner.start_docker(container, name=name, port=port, image=image_uri,
                                                  timeout_s=timeout, gpus=None if gpus == "none" else gpus,
                                                  on_progress=progress)
                else:
                    started = runner.start(container, name=name, port=port, timeout_s=timeout, on_progress=progress)
        for warning in started.startup.warnings:
            out.warn(warning)

        def human(console):
            server = started.server
            console.print(f"[bold]{server.name}[/bold] answers on {server.url} after {int(started.elapsed_s)}s "
                          f"({server.mode}" + (f", K={server.k})" if server.k else ")"), soft_wrap=True)
            console.print(f"  environment: {container.source}", markup=False, soft_wrap=True)
            console.print(f"  vLLM start-up: {started.startup.summary()}", markup=False, soft_wrap=True)
            console.print(f"  log: {server.log_path}", markup=False, soft_wrap=True)
            console.print(f"  try: peagle invoke {server.url} \"Write a Python quicksort\"", markup=False, soft_wrap=True)
            console.print(f"       peagle bench run {server.url} --mode {server.mode}"
                          + (f" --k {server.k}" if server.k else ""), markup=False, soft_wrap=True)
            console.print(f"       peagle metrics {server.url} --window 0s", markup=False, soft_wrap=True)
            console.print(f"  stop: peagle local stop --name {server.name}", markup=False, soft_wrap=True)

        out.result({"local": started.server, "startup": started.startup, "elapsed_s": started.elapsed_s}, human)

    run(json_output, body)


def _dry_run(out, container, *, port, name, docker, image, gpus) -> None:
    import shlex

    from ..local import docker as docker_mod
    from ..local import runner

    if docker:
        if image is None:
            from ..errors import UsageError

            raise UsageError("--docker needs an image", "pass --image (e.g. peagle-vllm) or --model ALIAS")
        command = docker_mod.run_command(image, container.environment, container.mounts, port=port, name=name,
                                         gpus=None if gpus == "none" else gpus)
        environment = container.environment
    else:
        environment, command = runner.plan_command(container, port=port)

    from ..redaction import mask_argv, mask_env, register_secret_env

    register_secret_env(dict(environment))  # shown by name, never by value (as deploy --dry-run)
    environment, command = mask_env(dict(environment)), mask_argv(command)

    def human(console):
        console.print(f"environment ({container.source}):", markup=False, soft_wrap=True)
        for key in sorted(environment):
            console.print(f"  {key}={environment[key]}", markup=False, soft_wrap=True)
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
                    console.print(f"  vLLM start-up: {row.startup.summary()}", markup=False, soft_wrap=True)
                if row.failure:
                    console.print(f"  last error: {row.failure}", markup=False, soft_wrap=True)

        out.result({"servers": rows}, human)

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
