"""The bundled container's entrypoint: SM_VLLM_* env -> validated `vllm serve` argv."""

from .args import ContainerConfigError, build_argv
from .validate import validate

__all__ = ["ContainerConfigError", "build_argv", "validate"]
