"""The bundled container's entrypoint: validate, then exec `vllm serve` so signals reach vLLM.

    python -m peagle_deploy.container [serve] [--print-args]

SageMaker starts a hosting container as `docker run IMAGE serve`, so a leading `serve` is accepted.
"""

from __future__ import annotations

import os
import shlex
import sys

from .args import ContainerConfigError, build_argv, with_defaults
from .lossless import warnings
from .validate import validate
from .vllm_version import installed_vllm_version


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["serve"]:  # the SageMaker hosting contract: `docker run IMAGE serve`
        args = args[1:]
    unknown = [a for a in args if a != "--print-args"]
    if unknown:
        sys.stderr.write(f"peagle-container: error: unknown argument {unknown[0]!r} (only serve, --print-args)\n")
        return 2
    try:
        speculative = validate(os.environ)
        command = build_argv(with_defaults(os.environ, installed_vllm_version()))
    except ContainerConfigError as exc:
        sys.stderr.write(f"peagle-container: error: {exc}\n")
        return 2
    for line in warnings(speculative):
        sys.stderr.write(f"peagle-container: warning: {line}\n")
    if "--print-args" in args:
        sys.stdout.write(shlex.join(command) + "\n")
        return 0
    sys.stderr.write(f"peagle-container: exec {shlex.join(command)}\n")
    sys.stderr.flush()
    try:
        os.execvp(command[0], command)
    except OSError as exc:
        sys.stderr.write(f"peagle-container: error: cannot start {command[0]}: {exc.strerror}\n")
        return 127
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
