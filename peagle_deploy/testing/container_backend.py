"""The emulator's real backend: each endpoint runs its model's container for real, on this machine.

    backend = ContainerBackend({"s3://bucket/models/target/": "/data/target",
                                "s3://bucket/heads/p-eagle/": "/data/drafter"})
    with SageMakerEmulator.server(backend=backend) as emu:
        subprocess.run(["peagle", "deploy", ...], env=emu.env)   # real vLLM behind the endpoint

CreateEndpoint starts the bundled entrypoint (`python -m peagle_deploy.container`, which execs `vllm`
from PATH: pass `vllm_bin` for another environment's) with the model's Environment; its model data and
data channels (S3 URIs) are mapped to local directories by longest S3 prefix, exactly as `peagle local`
maps them. With `image=` it runs that image in Docker or Podman instead (`ENGINE run --rm IMAGE serve`, the
directories mounted read-only at /opt/ml/model and /opt/ml/additional-model-data-sources/CHANNEL). The endpoint stays Creating until the container answers /ping (InService) or exits (Failed,
with the container's error line as FailureReason). Every output line goes to the emulated CloudWatch
Logs group /aws/sagemaker/Endpoints/NAME (stream AllTraffic/i-...), where `peagle metrics` reads vLLM's
`SpecDecoding metrics` lines. InvokeEndpoint and InvokeEndpointWithResponseStream are forwarded to the
container's /invocations (server mode). DeleteEndpoint, and leaving the emulator, stop the container.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import secrets
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..local import engine as engine_mod
from ..local.engine import Engine, find_engine
from ..local.mounts import Mounts, host_environment
from ..local.process import launch, ping, stop_group
from ..local.runner import process_environment
from ..vllm_failure import MAX_REASON, failure_line, tail
from .streaming import event_frame, exception_frame, scope_region

_ROUTE = re.compile(r"^/endpoints/(?P<name>[^/]+)/(?P<op>invocations|invocations-response-stream)$")
VARIANT = "AllTraffic"


class UnmappedData(ValueError):
    """An S3 URI with no local directory in the backend's mapping."""


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@dataclass
class _Container:
    name: str
    port: int
    log_path: Path
    stream: str
    endpoint: Any  # moto's FakeEndpoint: its status is what DescribeEndpoint answers
    process: Any = None
    container: str | None = None  # the engine's container name, when the backend runs an image
    stopped: threading.Event = field(default_factory=threading.Event)
    offset: int = 0
    partial: bytes = b""
    thread: threading.Thread | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)  # the watcher and stop() both flush


class ContainerBackend:
    def __init__(self, data: Mapping[str, str | Path], *, vllm_bin: str | Path | None = None,
                 env: Mapping[str, str] | None = None, startup_timeout_s: float = 900.0,
                 log_dir: str | Path | None = None, poll_s: float = 0.5, stop_grace_s: float = 30.0,
                 image: str | None = None, engine: Engine | None = None):
        """`data`: S3 URI prefix -> local directory; `env`: extra variables for the container process
        (not part of the model's Environment, e.g. VLLM_CPU_KVCACHE_SPACE); `vllm_bin`: a directory put
        first on PATH so the entrypoint finds that `vllm`. With `image` each endpoint runs that image in a
        real container engine instead (`engine`, default: found as `peagle local --docker` finds it), as
        SageMaker runs it: `IMAGE serve`, the data read-only under /opt/ml, the model's Environment as is."""
        self.data = {prefix: Path(path) for prefix, path in data.items()}
        self.image = image
        self.engine = engine if engine is not None or image is None else find_engine()
        self.vllm_bin = Path(vllm_bin) if vllm_bin else None
        self.env = dict(env or {})
        self.startup_timeout_s = startup_timeout_s
        self.poll_s = poll_s
        self.stop_grace_s = stop_grace_s
        self._log_dir = Path(log_dir) if log_dir else None
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self._containers: dict[str, _Container] = {}
        self._lock = threading.Lock()
        self.emulator: Any = None

    # mapping ------------------------------------------------------------------------------------
    def local_path(self, uri: str) -> Path:
        matches = [prefix for prefix in self.data if uri.startswith(prefix)]
        if not matches:
            raise UnmappedData(f"no local directory for {uri}: map its S3 prefix in ContainerBackend(data=...)")
        prefix = max(matches, key=len)
        local = self.data[prefix] / uri[len(prefix):].lstrip("/")
        if not local.is_dir():
            raise UnmappedData(f"{uri} maps to {local}, which is not a directory (SageMaker's download would fail)")
        return local

    def mounts_for(self, container: Mapping[str, Any]) -> Mounts:
        source = (container.get("ModelDataSource") or {}).get("S3DataSource") or {}
        uri = source.get("S3Uri") or container.get("ModelDataUrl")
        if not uri:
            raise UnmappedData("the model has neither ModelDataSource nor ModelDataUrl")
        channels = {c["ChannelName"]: self.local_path(c["S3DataSource"]["S3Uri"])
                    for c in container.get("AdditionalModelDataSources") or []}
        return Mounts(model=self.local_path(uri), channels=channels)

    # lifecycle (called by the emulator's hooks) -------------------------------------------------
    def on_create(self, sagemaker: Any, endpoint: Any, model_name: str | None = None) -> None:
        """moto's CreateEndpoint hook (once the instances are provisioned): run the container of `model_name` (the
        model of the instance pool that got the instances), else of the endpoint config's (first) model."""
        config = sagemaker.endpoint_configs[endpoint.endpoint_config_name]
        if not config.production_variants[0].get("ModelName"):  # component-based: no container of its own (docs/ci.md)
            return
        model = sagemaker.describe_model(model_name or config.production_variants[0]["ModelName"])
        self.start(endpoint, model.primary_container)

    def start(self, endpoint: Any, container: Mapping[str, Any]) -> None:
        """Launch the container for a new endpoint (moto's FakeEndpoint, status set to Creating)."""
        name = endpoint.endpoint_name
        endpoint.endpoint_status = "Creating"
        log_dir = self._logs_dir()
        item = _Container(name=name, port=_free_port(), log_path=log_dir / f"{name}-{secrets.token_hex(4)}.log",
                          stream=f"{VARIANT}/i-{secrets.token_hex(8)}", endpoint=endpoint)
        self._create_log_stream(item)
        try:
            mounts = self.mounts_for(container)
        except UnmappedData as exc:
            self._fail(item, str(exc))
            return
        try:
            if self.image is not None:
                item.container = f"peagle-emulator-{name}-{secrets.token_hex(4)}"
                run = engine_mod.run_command(self.engine, self.image, container.get("Environment") or {}, mounts,
                                             port=item.port, container=item.container, gpus=None, detach=False,
                                             extra_env=self.env)
                item.process = launch(run.client_env(process_environment({})), item.log_path, command=run.argv)
            else:
                item.process = launch(self._process_env(container, mounts, item.port), item.log_path)
        except OSError as exc:
            self._fail(item, f"cannot start the container: {exc.strerror or exc}")
            return
        with self._lock:
            self._containers[name] = item
        item.thread = threading.Thread(target=self._watch, args=(item,), name=f"container-{name}", daemon=True)
        item.thread.start()

    def _process_env(self, container: Mapping[str, Any], mounts: Mounts, port: int) -> dict[str, str]:
        """The entrypoint as a process here: the container's paths mapped to the local directories."""
        environment = host_environment(container.get("Environment") or {}, mounts, port)
        extra = dict(self.env)
        if self.vllm_bin:
            extra["PATH"] = f"{self.vllm_bin}{os.pathsep}{extra.get('PATH', os.environ.get('PATH', ''))}"
        return {**process_environment(environment), **extra}

    def stop(self, name: str) -> bool:
        """Stop an endpoint's container (its group), flush its last log lines; False if none ran."""
        with self._lock:
            item = self._containers.pop(name, None)
        if item is None:
            return False
        item.stopped.set()
        self._terminate(item)
        if item.process is not None:
            item.process.wait(timeout=30)
        if item.thread is not None:
            item.thread.join(30)
        self._pump(item)
        return True

    def _terminate(self, item: _Container) -> None:
        """SIGTERM, SIGKILL after the grace period: to the process group, or through the engine (which also
        removes the container: it runs with --rm)."""
        if item.process is None:
            return
        if item.container is not None:
            engine_mod.stop(self.engine, item.container, grace_s=int(self.stop_grace_s))
            try:
                item.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                stop_group(item.process.pid, grace_s=10)
            if engine_mod.exists(self.engine, item.container):
                engine_mod.remove(self.engine, item.container)
        else:
            stop_group(item.process.pid, grace_s=self.stop_grace_s)

    def stop_all(self) -> None:
        for name in list(self._containers):
            self.stop(name)
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def port(self, name: str) -> int | None:
        item = self._containers.get(name)
        return item.port if item else None

    def running(self) -> list[str]:
        return [n for n, c in self._containers.items() if c.process is not None and c.process.poll() is None]

    # the watcher --------------------------------------------------------------------------------
    def _watch(self, item: _Container) -> None:
        start = time.monotonic()
        while not item.stopped.is_set():
            self._pump(item)
            if item.endpoint.endpoint_status == "Creating":
                code = item.process.poll()
                if code is not None:
                    self._pump(item)
                    self._fail(item, failure_line(tail(item.log_path), code))
                elif ping(item.port, timeout=1.0):
                    self._pump(item)  # the start-up lines are in CloudWatch before anyone sees InService
                    item.endpoint.endpoint_status = "InService"
                elif time.monotonic() - start > self.startup_timeout_s:
                    self._terminate(item)
                    self._pump(item)
                    self._fail(item, f"the container did not pass the ping health check within "
                                     f"{int(self.startup_timeout_s)}s")
            item.stopped.wait(self.poll_s)

    def _fail(self, item: _Container, reason: str) -> None:
        item.endpoint.failure_reason = reason[:MAX_REASON]
        item.endpoint.endpoint_status = "Failed"

    # CloudWatch Logs ----------------------------------------------------------------------------
    def _logs(self) -> Any:
        return self.emulator.client("logs")

    def _create_log_stream(self, item: _Container) -> None:
        logs = self._logs()
        group = f"/aws/sagemaker/Endpoints/{item.name}"
        try:
            logs.create_log_group(logGroupName=group)
        except logs.exceptions.ResourceAlreadyExistsException:
            pass
        logs.create_log_stream(logGroupName=group, logStreamName=item.stream)

    def _pump(self, item: _Container) -> None:
        """New complete lines of the container's output -> PutLogEvents (batches of at most 1,000)."""
        with item.lock:
            try:
                with open(item.log_path, "rb") as handle:
                    handle.seek(item.offset)
                    data = handle.read()
            except OSError:
                return
            item.offset += len(data)
            lines = (item.partial + data).split(b"\n")
            item.partial = lines.pop()
            if item.process is not None and item.process.poll() is not None and item.partial:
                lines.append(item.partial)  # the container is gone: its last line will not be finished
                item.partial = b""
            messages = [line.decode("utf-8", errors="replace").rstrip("\r") for line in lines]
            messages = [m for m in messages if m.strip()]
            now = int(time.time() * 1000)
            for i in range(0, len(messages), 1000):
                events = [{"timestamp": now, "message": m} for m in messages[i:i + 1000]]
                try:
                    self._logs().put_log_events(logGroupName=f"/aws/sagemaker/Endpoints/{item.name}",
                                                logStreamName=item.stream, logEvents=events)
                except Exception:  # noqa: BLE001 - the emulator is shutting down or was reset
                    return

    def _logs_dir(self) -> Path:
        if self._log_dir is not None:
            self._log_dir.mkdir(parents=True, exist_ok=True)
            return self._log_dir
        if self._tmp is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="peagle-emulator-")
        return Path(self._tmp.name)

    # sagemaker-runtime --------------------------------------------------------------------------
    def middleware(self, app: Any, emulator: Any) -> Any:
        """Forward invocations of InService endpoints this backend runs to their container."""
        backend = self

        def forward(environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
            match = _ROUTE.match(environ.get("PATH_INFO", ""))
            port = backend.port(match["name"]) if match and environ.get("REQUEST_METHOD") == "POST" else None
            region = scope_region(environ.get("HTTP_AUTHORIZATION"), emulator.region)
            if port is None or emulator.endpoint_status(match["name"], region) != "InService":
                return app(environ, start_response)
            body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
            content_type = environ.get("CONTENT_TYPE") or "application/json"
            try:
                connection = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
                connection.request("POST", "/invocations", body=body, headers={"Content-Type": content_type})
                response = connection.getresponse()
            except OSError as exc:
                return _model_error(start_response, emulator, match["name"], 502, f"container unreachable: {exc}")
            if response.status >= 300:
                text = response.read().decode("utf-8", errors="replace")
                connection.close()
                return _model_error(start_response, emulator, match["name"], response.status, text)
            if match["op"] == "invocations":
                payload = response.read()
                connection.close()
                start_response("200 OK", [("Content-Type", response.getheader("Content-Type") or "application/json")])
                return [payload]
            start_response("200 OK", [("Content-Type", "application/vnd.amazon.eventstream"),
                                      ("X-Amzn-SageMaker-Content-Type",
                                       response.getheader("Content-Type") or "text/event-stream")])
            return _frames(response, connection)

        return forward


def _frames(response: Any, connection: Any) -> Iterable[bytes]:
    """The container's bytes as they arrive, each read one PayloadPart (as SageMaker streams them)."""
    try:
        while True:
            chunk = response.read1(65536)
            if not chunk:
                return
            yield event_frame(chunk)
    except OSError as exc:
        yield exception_frame("ModelStreamError", f"the container's stream broke: {exc}")
    finally:
        connection.close()


def _model_error(start_response: Any, emulator: Any, name: str, status: int, text: str) -> list[bytes]:
    """SageMaker's answer when the container answers an error: 424 ModelError with the original message."""
    body = {"message": f"Received server error ({status}) from primary with message \"{text}\".",
            "OriginalStatusCode": status, "OriginalMessage": text,
            "LogStreamArn": f"arn:aws:logs:{emulator.region}:123456789012:log-group:/aws/sagemaker/Endpoints/{name}"}
    start_response("424 Failed Dependency", [("Content-Type", "application/json"), ("x-amzn-ErrorType", "ModelError")])
    return [json.dumps(body).encode()]

