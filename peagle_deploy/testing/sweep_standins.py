"""Stand-in servers for `peagle sweep` whose speed and acceptance depend on mode and K.

Not vLLM: a first-order model of speculative decoding, so a sweep's table has a known shape in tests
and in docs/sweep.md. Each draft position i is accepted (cumulatively) with p_i = `accept` ** i (DFlash:
`dflash_accept` ** i), so a step emits E(K) = 1 + sum p_i tokens; a step costs 1 + 0.02 K (verification) plus
0.06 (P-EAGLE: one drafter pass), 0.06 K (EAGLE-3: K passes) or 0.09 (DFlash: one pass of a deeper drafter); a
response of n tokens takes n / (base_tok_s x E / cost) seconds, with verification dearer as more requests are in
flight (0.02 K x in-flight / 2). These are the stand-in's own numbers, not measurements of any vLLM. At its first
request each endpoint also logs the start-up lines vLLM would for its image and mode (`startup_lines`: version,
engine config, the runner line that vLLM version writes, DFlash's drafter architecture). Two front ends:

- `SweepStandIn(emulator).install()`: the emulator's SageMaker endpoints, and the inference components of a
  sweep's one endpoint (`--hosting component`), answer after that delay (the name says its mode and K,
  peagle-<sweep>-p-eagle-k7) and write vLLM's `SpecDecoding metrics` line to their CloudWatch log group (an
  endpoint's, or a component's own) as they serve. `together` lists every pair of targets that were ever served at
  the same moment (a component sweep measures one at a time: none).
- `url_standins(configs)`: one FakeVllm per configuration (for `peagle sweep --url`), its chunk gap
  set by the same model and its /metrics counters by the same acceptance.
"""

from __future__ import annotations

import re
import threading
import time
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Any

_NAME = re.compile(r"-(?P<mode>off|eagle3|p-eagle|dflash)(?:-k(?P<k>\d+))?$")
STATS_FORMAT = ("SpecDecoding metrics: Mean acceptance length: %.2f, Accepted throughput: %.2f tokens/s, "
                "Drafted throughput: %.2f tokens/s, Accepted: %d tokens, Drafted: %d tokens, "
                "Per-position acceptance rate: %s, Avg Draft acceptance rate: %.1f%%")


@dataclass
class SpecModel:
    accept: float = 0.8
    base_tok_s: float = 60.0  # one stream without speculation
    verify_cost: float = 0.02
    draft_cost: float = 0.06
    dflash_accept: float = 0.85
    dflash_draft_cost: float = 0.09

    def per_position(self, k: int, mode: str = "p-eagle") -> list[float]:
        accept = self.dflash_accept if mode == "dflash" else self.accept
        return [accept ** i for i in range(1, k + 1)]

    def speedup(self, mode: str, k: int | None, in_flight: int = 1) -> float:
        """Over no speculation; verifying K tokens gets dearer as more requests share the GPU."""
        if mode == "off" or not k:
            return 1.0
        expected = 1 + sum(self.per_position(k, mode))
        drafting = {"p-eagle": self.draft_cost, "dflash": self.dflash_draft_cost}.get(mode, self.draft_cost * k)
        return expected / (1 + self.verify_cost * k * max(1.0, in_flight / 2) + drafting)

    def seconds(self, mode: str, k: int | None, tokens: int, in_flight: int = 1) -> float:
        return tokens / (self.base_tok_s * self.speedup(mode, k, in_flight))

    def stats_line(self, k: int, drafts: int = 100, elapsed: float = 10.0, mode: str = "p-eagle") -> str:
        accepted_per_pos = [round(drafts * p) for p in self.per_position(k, mode)]
        accepted, drafted = sum(accepted_per_pos), drafts * k
        rates = ", ".join(f"{a / drafts:.3f}" for a in accepted_per_pos)
        return STATS_FORMAT % (1 + accepted / drafts, accepted / elapsed, drafted / elapsed, accepted, drafted,
                               rates, accepted / drafted * 100)


def parse_endpoint(name: str) -> tuple[str, int | None] | None:
    match = _NAME.search(name)
    if not match:
        return None
    return match["mode"], int(match["k"]) if match["k"] else None


@dataclass
class SweepStandIn:
    """Installs itself as the emulator's `runtime.on_request`; `served` counts requests per endpoint."""

    emulator: Any
    model: SpecModel = field(default_factory=SpecModel)
    served: dict[str, int] = field(default_factory=dict)
    tags: dict[str, dict[str, str]] = field(default_factory=dict)  # endpoint -> its tags, read at its first request
    hold: dict[str, threading.Event] = field(default_factory=dict)  # name suffix -> released when set
    arrived: dict[str, threading.Event] = field(default_factory=dict)
    in_flight: dict[str, int] = field(default_factory=dict)
    together: set[frozenset[str]] = field(default_factory=set)  # targets served at the same moment
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _logs: Any = None
    _groups: set[str] = field(default_factory=set)

    def install(self) -> SweepStandIn:
        self.emulator.runtime.tokens = [f" t{i}" for i in range(12)]
        self.emulator.runtime.on_request = self.on_request
        return self

    def hold_at(self, suffix: str) -> threading.Event:
        """Requests to the endpoint ending in `suffix` wait until the returned event is set (tests use it
        to interrupt a sweep half-way); `arrived[suffix]` is set when the first one comes in."""
        self.arrived[suffix] = threading.Event()
        self.hold[suffix] = threading.Event()
        return self.hold[suffix]

    def on_request(self, name: str, _body: dict) -> None:
        """`name`: the endpoint's, or the inference component's the request addresses."""
        parsed = parse_endpoint(name)
        component = self.emulator.components.peek(name) is not None
        with self._lock:
            first = name not in self.served
            self.served[name] = self.served.get(name, 0) + 1
            if self._logs is None:
                self._logs = self.emulator.client("logs")
            sm = self.emulator.client("sagemaker") if first else None
        if sm is not None:
            arn = (sm.describe_inference_component(InferenceComponentName=name)["InferenceComponentArn"] if component
                   else sm.describe_endpoint(EndpointName=name)["EndpointArn"])
            self.tags[name] = {t["Key"]: t["Value"] for t in sm.list_tags(ResourceArn=arn)["Tags"]}
        for suffix, event in self.hold.items():
            if name.endswith(suffix):
                self.arrived[suffix].set()
                self._wait(event, name, component)
        if parsed is None:
            return
        mode, k = parsed
        if first:
            image = self._image(sm, name, component)
            for line in startup_lines(image, mode, k):
                self._log(name, line, create=not self._created(name), component=component)
        if mode != "off" and k:
            self._log(name, self.model.stats_line(k, mode=mode), create=not self._created(name), component=component)
        with self._lock:
            self.in_flight[name] = busy = self.in_flight.get(name, 0) + 1
            serving = frozenset(n for n, count in self.in_flight.items() if count)
            if len(serving) > 1:
                self.together.add(serving)
        try:
            time.sleep(self.model.seconds(mode, k, len(self.emulator.runtime.tokens), busy))
        finally:
            with self._lock:
                self.in_flight[name] -= 1

    def _image(self, sm: Any, name: str, component: bool) -> str:
        """The image of the model serving `name` (its vLLM version decides the start-up lines)."""
        try:
            if component:
                model = sm.describe_inference_component(InferenceComponentName=name)["Specification"]["ModelName"]
            else:
                config = sm.describe_endpoint(EndpointName=name)["EndpointConfigName"]
                model = sm.describe_endpoint_config(EndpointConfigName=config)["ProductionVariants"][0]["ModelName"]
            return sm.describe_model(ModelName=model)["PrimaryContainer"]["Image"]
        except Exception:  # noqa: BLE001 - a stand-in: no image, no version
            return ""

    def _created(self, name: str) -> bool:
        with self._lock:
            return name in self._groups

    def _wait(self, event: threading.Event, name: str, component: bool = False, limit_s: float = 120.0) -> None:
        """Until released, or the endpoint (component) is deleted (SageMaker ends its requests then), or the emulator
        stops; bounded."""
        deadline = time.monotonic() + limit_s
        while not event.wait(0.1) and time.monotonic() < deadline and not self.emulator.closing.is_set():
            gone = (self.emulator.components.peek(name) is None if component
                    else self.emulator.endpoint_status(name) is None)
            if gone:
                return

    def _log(self, name: str, line: str, *, create: bool, component: bool = False) -> None:
        # a component's container writes to its own group, a stream per copy (lifecycle.components.log_group)
        group = f"/aws/sagemaker/{'InferenceComponents' if component else 'Endpoints'}/{name}"
        stream = f"{name}/i-standin" if component else "AllTraffic/i-standin"
        with self._lock:
            if create and name not in self._groups:
                self._groups.add(name)
                self._logs.create_log_group(logGroupName=group)
                self._logs.create_log_stream(logGroupName=group, logStreamName=stream)
            self._logs.put_log_events(logGroupName=group, logStreamName=stream,
                                      logEvents=[{"timestamp": int(time.time() * 1000), "message": line}])


@contextmanager
def url_standins(specs: list[tuple[str, int | None]], model: SpecModel | None = None, tokens: int = 12):
    """One FakeVllm per (mode, K); yields the `--url` arguments (MODE:K=URL, off=URL)."""
    from .fake_vllm import FakeVllm

    spec_model = model or SpecModel()
    with ExitStack() as stack:
        urls = []
        for mode, k in specs:
            gap = spec_model.seconds(mode, k, tokens) / tokens
            accepted = tuple(round(4 * p) for p in spec_model.per_position(k, mode)) if k else ()
            server = stack.enter_context(FakeVllm([f" t{i}" for i in range(tokens)], gap_s=gap,
                                                  accepted_per_request=accepted))
            urls.append(f"{mode}={server.url}" if mode == "off" else f"{mode}:{k}={server.url}")
        yield urls


def startup_lines(image: str, mode: str, k: int | None, *, model: str = "/opt/ml/model") -> list[str]:
    """The start-up lines vLLM writes for this image's version and this mode, in vLLM's formats
    (lifecycle/startup_log.py reads them): the version banner, the engine line with the speculative config and the
    runner line the version writes for the mode (docs/vllm-versions.md's table: P-EAGLE's fallback from 0.22, "Using
    V2 Model Runner" where V2 is the default for qwen3-coder's and gpt-oss's MoE architectures, from 0.29; none
    otherwise), and DFlash's drafter architecture."""
    from ..container.vllm_version import release
    from ..speculative import CHANNEL_ROOT, drafter_channel, parse_mode
    from ..vllm_runner import image_vllm_version

    version = image_vllm_version(image) or "0.28.0"
    key = release(version) or (0, 28)
    prefix = "(APIServer pid=1) INFO 12-01 00:00:00 [api_utils.py:347]"
    lines = [f"{prefix} vLLM server version {version}, serving model {model}"]
    spec = "None"
    if mode != "off" and k:
        method = "dflash" if mode == "dflash" else "eagle3"
        path = f"{CHANNEL_ROOT}/{drafter_channel(parse_mode(mode))}"
        spec = f"SpeculativeConfig(method='{method}', model='{path}', num_spec_tokens={k})"
        given = {"model": path, "method": method, "num_speculative_tokens": k}
        if mode != "dflash":
            given["parallel_drafting"] = mode == "p-eagle"
        lines.append(f"(APIServer pid=1) INFO 12-01 00:00:00 [api_utils.py:286] non-default args: "
                     f"{{'model': '{model}', 'speculative_config': {given!r}}}")
    if mode == "dflash":
        lines.append("(APIServer pid=1) INFO 12-01 00:00:01 [model.py:733] Resolved architecture: DFlashDraftModel")
    if mode == "p-eagle" and key >= (0, 22):
        lines.append("(EngineCore pid=2) WARNING 12-01 00:00:02 [vllm.py:725] Model Runner V2 does not yet support "
                     "parallel drafting for EAGLE speculative decoding; using the V1 model runner instead.")
    elif key >= (0, 29):
        lines.append("(Worker pid=3) INFO 12-01 00:00:03 [gpu_worker.py:396] Using V2 Model Runner")
    lines.append(f"(EngineCore pid=2) INFO 12-01 00:00:02 [core.py:133] Initializing a V1 LLM engine (v{version}) with "
                 f"config: model='{model}', speculative_config={spec}, tokenizer='{model}'")
    return lines

