"""`peagle container`: the bundled vLLM container's argv, and its build context."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from .common import JsonOpt, run

container_app = typer.Typer(help="The bundled vLLM + P-EAGLE container: its argv and its Dockerfile.",
                            no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.add_typer(container_app, name="container")


@container_app.command("args")
def args(
    env: Annotated[list[str] | None, typer.Option("--env", help="KEY=VALUE (repeatable); default: this shell's env.")] = None,
    env_file: Annotated[Path | None, typer.Option(help="A file of KEY=VALUE lines (docker --env-file format).")] = None,
    json_output: JsonOpt = False,
) -> None:
    """Show the `vllm serve` argv the container would run for an environment, after validating it."""

    def body(out):
        import os
        import shlex

        from ..container import ContainerConfigError, build_argv, validate
        from ..container.args import with_defaults
        from ..container.lossless import warnings
        from ..container.vllm_version import installed_vllm_version
        from ..errors import UsageError
        from ..inputs import parse_env

        values: dict[str, str] = _read_env_file(env_file) if env_file is not None else {}
        values.update(parse_env(env or []))
        from_shell = not (env or env_file)
        environment = dict(os.environ) if from_shell else values
        try:
            speculative = validate(environment)
            argv = build_argv(with_defaults(environment, installed_vllm_version()))
        except ContainerConfigError as exc:
            hint = ("this shell has no container environment: pass --env HF_MODEL_ID=<model> (and "
                    "--env SM_VLLM_...=...) or --env-file FILE" if from_shell and not _container_env(environment)
                    else "fix the container environment")
            raise UsageError(str(exc), hint) from None
        if speculative is None:
            verdict = "speculative decoding: off (SM_VLLM_SPECULATIVE_CONFIG not set)"
        else:
            verdict = (f"speculative config: valid (method {speculative.get('method')}, "
                       f"K={speculative['num_speculative_tokens']}, "
                       f"parallel_drafting={bool(speculative.get('parallel_drafting'))})")

        for line in warnings(speculative):
            out.warn(line)

        def human(console) -> None:
            console.print(shlex.join(argv), markup=False, highlight=False, soft_wrap=True)
            console.print(verdict, markup=False, highlight=False)

        out.result({"argv": argv, "valid": True, "speculative_config": speculative}, human)

    run(json_output, body)


def _container_env(environment: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in environment.items() if k.startswith("SM_VLLM_") or k in ("HF_MODEL_ID",)}


def _read_env_file(path: Path) -> dict[str, str]:
    """docker's --env-file format: KEY=VALUE lines, '#' comments and blank lines skipped, a bare KEY
    taking this shell's value (skipped when unset)."""
    import os

    from ..errors import UsageError
    from ..inputs import parse_env

    from ..safe_write import regular_file

    regular_file(path, what="--env-file", hint="pass a file of KEY=VALUE lines")  # a fifo would block
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError:
        raise UsageError(f"--env-file {path} is not UTF-8 text", "pass a file of KEY=VALUE lines") from None
    except OSError as exc:
        raise UsageError(f"cannot read --env-file {path}: {exc.strerror}", "check the path") from None
    values: dict[str, str] = {}
    for number, line in enumerate(lines, 1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        if "=" not in text:
            if not text.replace("_", "").isalnum():
                raise UsageError(f"--env-file {path} line {number} ({text[:40]!r}) is not KEY=VALUE",
                                 "write KEY=VALUE lines")
            if text in os.environ:
                values[text] = os.environ[text]
            continue
        try:
            values.update(parse_env([line.lstrip()]))
        except UsageError as exc:
            raise UsageError(f"--env-file {path} line {number}: {exc.message}", exc.hint) from None
    return values


@container_app.command("dockerfile")
def dockerfile(
    output: Annotated[Path, typer.Option(help="Directory to write the build context into.")] = Path("peagle-container"),
    base: Annotated[str | None, typer.Option(help="Base image (default: the AWS vLLM DLC for SageMaker).")] = None,
    wheel: Annotated[Path | None, typer.Option(help="A peagle_deploy-*.whl to copy into the context.")] = None,
    force: Annotated[bool, typer.Option(help="Write into a non-empty directory.")] = False,
    json_output: JsonOpt = False,
) -> None:
    """Write the Dockerfile and .dockerignore (and --wheel); then docker build the directory."""

    def body(out):
        import re
        import shutil

        from ..errors import UsageError
        from ..resources import templates_dir

        if wheel is not None and not (wheel.is_file() and re.match(r"^peagle_deploy-.*\.whl$", wheel.name)):
            raise UsageError(f"--wheel {wheel} is not a peagle_deploy-*.whl file", "build one with 'pip wheel --no-deps .'")
        if base is not None and not re.match(r"^[\w.\-/:@${}]+$", base):
            raise UsageError(f"--base {base!r} is not an image reference", "pass e.g. registry/repo:tag")
        if output.exists() and not output.is_dir():
            raise UsageError(f"--output {output} is a file, not a directory", "choose a directory for --output")
        if output.is_dir() and any(output.iterdir()) and not force:
            raise UsageError(f"--output {output} is not empty", "choose another --output or pass --force")
        from ..safe_write import probe, refuse_links, replace_file, write_text

        refuse_links(output, ["Dockerfile", ".dockerignore", *([wheel.name] if wheel is not None else [])],
                     flag="--output")
        try:
            probe(output)
        except OSError as exc:
            raise UsageError(f"cannot write to --output {output}: {exc.strerror or exc}",
                             "choose a directory you can write") from None
        source = templates_dir() / "container"
        text = (source / "Dockerfile").read_text(encoding="utf-8")
        if base:
            text = re.sub(r"^ARG BASE_IMAGE=.*$", f"ARG BASE_IMAGE={base}", text, count=1, flags=re.M)
        files = [str(write_text(output / "Dockerfile", text)),
                 str(write_text(output / ".dockerignore", (source / ".dockerignore").read_text(encoding="utf-8")))]
        if wheel is not None:
            with open(wheel, "rb") as source_wheel, replace_file(output / wheel.name, binary=True) as copy:
                shutil.copyfileobj(source_wheel, copy)
            files.append(str(output / wheel.name))
        build = f"docker build -t peagle-vllm {output}"
        next_steps = build if wheel else f"pip wheel --no-deps -w {output} <peagle source dir> && {build}"
        out.result({"written": files, "next": next_steps},
                   lambda console: console.print("\n".join(["wrote " + f for f in files] + ["next: " + next_steps]),
                                                 markup=False))

    run(json_output, body)
