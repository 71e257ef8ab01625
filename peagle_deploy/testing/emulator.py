"""moto made a faithful SageMaker for peagle: for this project's tests and for users' CI.

What it adds to moto (5.2):
- ml.g7e instance types (moto's endpoint-config validation predates them);
- scripted endpoint status: Creating for N describes, then InService or Failed with a reason;
- fault injection: fail a given API action N times with an AWS error code, or throttle every
  other call (ThrottlingException, which botocore's adaptive retry absorbs; the emulator's environment
  allows botocore 2 attempts, MAX_ATTEMPTS, so a scripted fault costs one back-off);
- gates and latency, to land a signal at an exact moment: `gate("CreateEndpoint")` holds the next such
  call (before or after SageMaker acts on it) until the test releases it; `delay(action, s)` slows one;
- duplicate names refused as SageMaker does ("Cannot create already existing endpoint ..."): moto
  silently overwrites them, which would hide name races from users' CI;
- a Service Quotas answer for `<instance type> for endpoint usage` (moto has none for SageMaker);
- the AWS Pricing API's GetProducts for SageMaker instances (moto has none), with the emulator's own
  round figures (`hosting_prices`), see `peagle_deploy.testing.pricing_emulation`;
- the JumpStart spec bucket `jumpstart-cache-prod-<region>`, seeded from the specs peagle ships;
- server mode: moto's WSGI app on 127.0.0.1 (port 0) in a thread, for tests that run the real
  `peagle` executable with AWS_ENDPOINT_URL. Scripted behaviour lives in this process's backend, so it
  applies in both modes. `middlewares` wrap the WSGI app: that is how response streaming (which moto
  lacks) is served, see `peagle_deploy.testing.streaming`;
- UpdateEndpoint (moto 5.2 has none): Updating for N describes, then InService on the new config, or a
  scripted failed update that returns to InService on the OLD config with a FailureReason (SageMaker's
  rollback), see `script_update`; while Updating, DescribeEndpoint names the config it moves to in
  `PendingDeploymentSummary` as SageMaker does; an update whose new config is deleted meanwhile fails the same
  way (rolled back, FailureReason names the config); every status DescribeEndpoint answered is kept in
  `status_history`;
- per-caller faults and gates: `caller=` limits a fault or gate to the process whose AWS_SDK_UA_APP_ID it is,
  so independent scenarios share one emulator; `fail(..., after=True)` lets the call act and then answers
  the error (a lost answer: botocore's retry then meets what the first attempt did);
- Application Auto Scaling for SageMaker variants (target checks, capacity moved into MIN..MAX, policies
  deleted with their target, faults and gates too): see `peagle_deploy.testing.autoscaling_emulation`;
- a real backend (`backend=ContainerBackend(...)`, see `peagle_deploy.testing.container_backend`): each
  endpoint runs its model's container for real, with its logs in the emulated CloudWatch group.
- SageMaker's OpenAI-compatible route (server mode): `/endpoints/NAME/openai/v1/chat/completions` with bearer
  tokens checked against `credentials` at `clock()` (see `peagle_deploy.testing.openai_route`);
- inference components (`components`, see `peagle_deploy.testing.component_emulation`): component-based endpoint
  configs, the component API, copies placed on the instance type's hardware, managed instance scaling, invocations
  by component, and scale to zero and back through Application Auto Scaling and CloudWatch alarms (evaluated by
  `peagle_deploy.testing.alarm_emulation`), all on `clock()` (`ManualClock` for tests).
- capacity per instance type and region (`set_capacity`), quotas enforced with SageMaker's ResourceLimitExceeded
  (`set_quota`), a variant's InstancePools and provisioning timeout (in emulated time), capacity reservations
  (`add_capacity_reservation`), and several regions in one emulator (`regions=`, `seed_region`, `set_price`):
  see `peagle_deploy.testing.capacity_emulation`;
- inference routers and their runtime's InvokeInferenceRouter, to endpoints in any region: see
  `peagle_deploy.testing.inference_router_emulation`.

    with SageMakerEmulator.server() as emu:
        emu.script_endpoints(creating_polls=3)
        subprocess.run(["peagle", "deploy", "qwen3-coder", "--role", emu.role_arn, "--yes"], env=emu.env)
"""

from __future__ import annotations

import functools
import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Any
from unittest import mock

from .aws_errors import json_error
from .capacity_emulation import CapacityEmulation
from .component_emulation import InferenceComponents
from .pricing_emulation import EMULATED_HOSTING_USD, pricing_middleware, stubber_patch

ACCOUNT = "123456789012"
FAKE_CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                    "AWS_SESSION_TOKEN": "testing"}
# botocore attempts in the emulator's environment (AWS_MAX_ATTEMPTS): one retry, so that a scripted throttle
# or 5xx costs one back-off, not the adaptive mode's eight (tens of seconds of real sleeping). A test about
# retries sets its own: `emu.max_attempts = None` leaves it out of `emu.env` (peagle's default, 8), or it sets
# AWS_MAX_ATTEMPTS itself.
MAX_ATTEMPTS = 2
# how long a test waits for a cause (a call held, a line printed) before it calls it a hang: not a speed budget
HANG_GUARD_S = 600.0
Middleware = Callable[[Any, "SageMakerEmulator"], Any]


@dataclass
class _Fault:
    action: str
    code: str
    message: str
    times: int
    status: int = 400
    skip: int = 0
    after: bool = False  # act first, then answer the error (the answer is lost)
    caller: str | None = None  # only calls from this AWS_SDK_UA_APP_ID
    resource: str | None = None  # only calls whose request names this resource


@dataclass
class Gate:
    """Holds one call of `action` until `release()`: `entered` is set once the call is held.

    `when="before"`: SageMaker has not acted yet (a create then happens only after the release);
    `when="after"`: it has acted, the answer is held back (a lost answer if the client gives up)."""

    action: str
    skip: int = 0
    when: str = "before"
    entered: threading.Event = field(default_factory=threading.Event)
    released: threading.Event = field(default_factory=threading.Event)
    done: threading.Event = field(default_factory=threading.Event)
    max_hold_s: float = 120.0
    caller: str | None = None  # only calls from this AWS_SDK_UA_APP_ID
    resource: str | None = None  # only calls whose request names this resource

    def wait_entered(self, timeout: float = HANG_GUARD_S, *, unless: Callable[[], bool] | None = None) -> None:
        """Until the call is held: a cause, not a time. `timeout` only guards against a hang (a loaded machine may
        take minutes to start a child); `unless` (the child exited, say) ends the wait at once."""
        deadline = time.monotonic() + timeout
        while not self.entered.wait(0.2 if unless else timeout):
            if unless is not None and unless():
                raise TimeoutError(f"no {self.action} call reached the gate: its caller is gone")
            if time.monotonic() > deadline:
                raise TimeoutError(f"no {self.action} call reached the gate within {timeout}s")

    def release(self) -> None:
        self.released.set()

    def hold(self) -> None:
        self.entered.set()
        self.released.wait(self.max_hold_s)  # bounded: a forgotten gate never hangs a test run


@dataclass
class _Script:
    creating_polls: int = 0
    final: str = "InService"
    reason: str | None = None
    seen: dict[str, int] = field(default_factory=dict)


@dataclass
class _UpdateScript:
    updating_polls: int = 1
    fail: bool = False
    reason: str | None = None
    new_fleet_logs: tuple[str, ...] = ()  # what the new fleet's container logs, one line per 10 s (acceptance_emulation)


@dataclass
class _PendingUpdate:
    new_config: str
    script: _UpdateScript
    seen: int = 0
    started: Any = None
    rollback_alarms: list[str] = field(default_factory=list)  # AutoRollbackConfiguration's
    fleet_log: Any = None  # acceptance_emulation.NewFleetLog


class SageMakerEmulator(CapacityEmulation):
    """Use `SageMakerEmulator.in_process()` (mock_aws) or `SageMakerEmulator.server()` (a local endpoint)."""

    def __init__(self, region: str = "us-east-1", backend: Any = None, regions: tuple[str, ...] = ()):
        """`region`: the default one (`env`, `client`); `regions`: more regions whose JumpStart bucket is seeded
        (every region answers, each with its own resources: see `peagle_deploy.testing.capacity_emulation`)."""
        self.region = region
        self.max_attempts: int | None = MAX_ATTEMPTS
        self.backend = backend  # a ContainerBackend runs each endpoint's container for real
        if backend is not None:
            backend.emulator = self
        self.role_arn = f"arn:aws:iam::{ACCOUNT}:role/peagle-emulator"
        self.endpoint_url: str | None = None
        self._script = _Script()
        self._faults: list[_Fault] = []
        self._throttle_every: int = 0
        self._gates: list[Gate] = []  # not taken yet
        self._issued: list[Gate] = []  # every gate, taken or not: `release_gates` ends each hold
        self._delays: dict[str, float] = {}
        self._calls = 0
        self.calls: list[str] = []
        self._capacity_init(regions)  # capacity, quotas, reservations, regional prices (capacity_emulation)
        self._update_script = _UpdateScript()
        self._updates: dict[str, _PendingUpdate] = {}
        self.update_requests: list[dict[str, Any]] = []  # every UpdateEndpoint body SageMaker accepted
        self.status_history: dict[str, list[str]] = {}  # endpoint -> every status DescribeEndpoint answered
        self._lock = threading.Lock()
        self.credentials = {FAKE_CREDENTIALS["AWS_ACCESS_KEY_ID"]: FAKE_CREDENTIALS["AWS_SECRET_ACCESS_KEY"]}
        self.clock: Callable[[], float] = time.time  # "now": bearer-token expiry, inference components' scaling
        from .streaming import RuntimeScript

        self.runtime = RuntimeScript()  # how endpoints answer `invoke` (server mode)
        self.hosting_prices = dict(EMULATED_HOSTING_USD)  # what GetProducts answers (the emulator's own figures)
        self.components = InferenceComponents(self, ACCOUNT)  # inference components and scale to zero
        self.closing = threading.Event()  # set as the server stops: paced and stalled answers end at once

    # configuration ------------------------------------------------------------------------------
    def script_endpoints(self, creating_polls: int = 0, final: str = "InService", reason: str | None = None) -> None:
        """New endpoints stay Creating for `creating_polls` describes, then turn `final`."""
        self._script = _Script(creating_polls, final, reason or ("scripted failure" if final == "Failed" else None))

    def script_update(self, updating_polls: int = 1, fail: bool = False, reason: str | None = None,
                      new_fleet_logs: list[str] | None = None) -> None:
        """Every later UpdateEndpoint: Updating for `updating_polls` describes, then InService on the new
        config; with `fail`, back to InService on the OLD config with FailureReason `reason` (a rollback).
        `new_fleet_logs`: while it runs, the new fleet's container logs these lines in turn, one every 10 s of
        `clock()`; a rollback alarm the update names that goes to ALARM meanwhile rolls it back
        (`acceptance_emulation`)."""
        self._update_script = _UpdateScript(updating_polls, fail,
                                            reason or ("scripted update failure" if fail else None),
                                            tuple(new_fleet_logs or ()))

    def fail(self, action: str, code: str = "InternalFailure", message: str = "injected failure",
             times: int = 1, status: int = 400, skip: int = 0, *, after: bool = False,
             caller: str | None = None, resource: str | None = None) -> None:
        """After `skip` good calls, the next `times` calls of API action `action` (e.g. 'CreateEndpoint')
        fail with `code` and HTTP `status` (500 for AWS's internal errors, which botocore retries).
        With `after`, SageMaker acts on the call first and only its answer is the error (a lost answer);
        with `caller`, only calls from that AWS_SDK_UA_APP_ID count; with `resource`, only calls naming it."""
        self._faults.append(_Fault(action, code, message, times, status, skip, after, caller, resource))

    def clear_faults(self, caller: str | None = None) -> None:
        """Forget the faults not yet fired (only `caller`'s, when given)."""
        with self._lock:
            self._faults = [f for f in self._faults if caller is not None and f.caller != caller]

    def throttle_every_other_call(self) -> None:
        self._throttle_every = 2

    def gate(self, action: str, *, skip: int = 0, when: str = "before", caller: str | None = None,
             resource: str | None = None) -> Gate:
        """Hold call number `skip + 1` of `action` until the returned gate is released (see Gate); with
        `caller`, only calls from that AWS_SDK_UA_APP_ID count; with `resource`, only calls whose request names
        it (e.g. the DescribeEndpoint of one endpoint among a listing's)."""
        if when not in ("before", "after"):
            raise ValueError("when must be 'before' or 'after'")
        gate = Gate(action, skip, when, caller=caller, resource=resource)
        with self._lock:
            self._gates.append(gate)
            self._issued.append(gate)
        return gate

    def release_gates(self) -> None:
        """Release every gate, those holding a call included (a failed test must not leave a call held for the
        next one), and forget them."""
        with self._lock:
            issued, self._issued, self._gates = self._issued, [], []
        for gate in issued:
            gate.release()

    def delay(self, action: str, seconds: float) -> None:
        """Every call of `action` takes `seconds` longer (latency, not a fault)."""
        self._delays[action] = seconds

    def resource_names(self, region: str | None = None) -> dict[str, list[str]]:
        """Every endpoint, endpoint config and model in `region` (default: the emulator's), from moto's backend."""
        from moto.sagemaker.models import sagemaker_backends

        backend = sagemaker_backends[ACCOUNT][region or self.region]
        return {"endpoints": sorted(backend.endpoints), "configs": sorted(backend.endpoint_configs),
                "models": sorted(backend._models)}

    def endpoint_status(self, name: str, region: str | None = None) -> str | None:
        """The emulated endpoint's status (None if it does not exist), read from moto's backend."""
        from moto.sagemaker.models import sagemaker_backends

        endpoint = sagemaker_backends[ACCOUNT][region or self.region].endpoints.get(name)
        return None if endpoint is None else endpoint.endpoint_status

    def create_endpoint_stack(self, name: str, *, tags: list[dict[str, str]] | None = None,
                              instance_type: str = "ml.g7e.2xlarge", environment: dict[str, str] | None = None,
                              region: str | None = None) -> None:
        """A model, endpoint config and endpoint named `name`, as another tool (or a person) would create
        them: without peagle's tags unless given. Tests use it to prove cleanup leaves such things alone.
        `environment`: the container's (e.g. SM_VLLM_SPECULATIVE_CONFIG, what the endpoint is served with)."""
        sm = self.client("sagemaker", region)
        tag_list = list(tags or [])
        container = {"Image": f"{ACCOUNT}.dkr.ecr.{region or self.region}.amazonaws.com/other:1"}
        if environment:
            container["Environment"] = dict(environment)
        sm.create_model(ModelName=name, ExecutionRoleArn=self.role_arn, PrimaryContainer=container, Tags=tag_list)
        sm.create_endpoint_config(EndpointConfigName=name, ProductionVariants=[{
            "VariantName": "AllTraffic", "ModelName": name, "InstanceType": instance_type,
            "InitialInstanceCount": 1}], Tags=tag_list)
        sm.create_endpoint(EndpointName=name, EndpointConfigName=name, Tags=tag_list)

    def put_log_lines(self, endpoint_name: str, lines: list[str], *, stream: str = "AllTraffic/i-0emulated0000001",
                      start_ms: int | None = None, step_ms: int = 1, region: str | None = None,
                      component: str | None = None) -> None:
        """Write `lines` to the endpoint's CloudWatch Logs group as its container would (group and stream created
        when missing), `step_ms` apart from `start_ms` (default: now); `component`: to that inference component's
        own group instead (/aws/sagemaker/InferenceComponents/NAME). Works in both modes."""
        import time

        logs = self.client("logs", region)
        group = (f"/aws/sagemaker/InferenceComponents/{component}" if component
                 else f"/aws/sagemaker/Endpoints/{endpoint_name}")
        for create, kwargs in ((logs.create_log_group, {"logGroupName": group}),
                               (logs.create_log_stream, {"logGroupName": group, "logStreamName": stream})):
            try:
                create(**kwargs)
            except logs.exceptions.ResourceAlreadyExistsException:
                pass
        first = int(time.time() * 1000) if start_ms is None else start_ms
        events = [{"timestamp": first + i * step_ms, "message": line} for i, line in enumerate(lines)]
        for i in range(0, len(events), 1000):
            logs.put_log_events(logGroupName=group, logStreamName=stream, logEvents=events[i:i + 1000])

    @property
    def env(self) -> dict[str, str]:
        """Environment for a subprocess (server mode): fake credentials, region, endpoint URL."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        env.update(FAKE_CREDENTIALS, AWS_DEFAULT_REGION=self.region, AWS_REGION=self.region,
                   AWS_CONFIG_FILE=os.devnull, AWS_SHARED_CREDENTIALS_FILE=os.devnull,
                   AWS_EC2_METADATA_DISABLED="true")
        if self.endpoint_url:
            env["AWS_ENDPOINT_URL"] = self.endpoint_url
        if self.max_attempts:
            env["AWS_MAX_ATTEMPTS"] = str(self.max_attempts)
        return env

    def reset(self) -> None:
        """Forget every resource (server mode; in-process mode resets when its block ends)."""
        import urllib.request

        with self._lock:
            self._updates.clear()
            self.status_history.clear()
            self.update_requests.clear()
        if self.endpoint_url:
            request = urllib.request.Request(f"{self.endpoint_url}/moto-api/reset", method="POST", data=b"")
            urllib.request.urlopen(request, timeout=10).close()

    def client(self, service: str, region: str | None = None) -> Any:
        import boto3

        return boto3.client(service, region_name=region or self.region, endpoint_url=self.endpoint_url,
                            aws_access_key_id="testing", aws_secret_access_key="testing")

    # hooks into moto ----------------------------------------------------------------------------
    def _take_gate(self, action: str, caller: str | None = None, names: frozenset[str] = frozenset()) -> Gate | None:
        with self._lock:
            for gate in self._gates:
                if (gate.action == action and not gate.entered.is_set() and gate.caller in (None, caller)
                        and gate.resource in (None, *names)):
                    if gate.skip > 0:
                        gate.skip -= 1
                        return None
                    self._gates.remove(gate)
                    return gate
        return None

    def _before_action(self, action: str, caller: str | None = None, names: frozenset[str] = frozenset()
                       ) -> tuple[tuple[int, dict[str, str], str] | None, _Fault | None]:
        """(an error to answer at once, or None; a fault to answer after acting, or None)."""
        with self._lock:
            self.calls.append(action)
            self._calls += 1
            if self._throttle_every and self._calls % self._throttle_every == 1:
                return json_error(400, "ThrottlingException", "Rate exceeded (emulated)"), None
            for fault in self._faults:
                if (fault.action == action and fault.times > 0 and fault.caller in (None, caller)
                        and fault.resource in (None, *names)):
                    if fault.skip > 0:
                        fault.skip -= 1
                        continue
                    fault.times -= 1
                    if fault.after:
                        return None, fault
                    return json_error(fault.status, fault.code, fault.message), None
        return None, None

    def _patches(self) -> list[Any]:
        from moto.sagemaker import models as sm_models
        from moto.sagemaker.responses import SageMakerResponse
        from moto.logs.responses import LogsResponse
        from moto.servicequotas.responses import ServiceQuotasResponse

        emulator = self
        original_call = SageMakerResponse.call_action
        original_validate = sm_models.FakeEndpointConfig.validate_instance_type
        original_create = sm_models.SageMakerModelBackend.create_endpoint
        original_describe = sm_models.SageMakerModelBackend.describe_endpoint
        original_delete = sm_models.SageMakerModelBackend.delete_endpoint
        original_create_model = sm_models.SageMakerModelBackend.create_model
        original_create_config = sm_models.SageMakerModelBackend.create_endpoint_config
        original_resource = sm_models.SageMakerModelBackend._get_resource_from_arn

        def resource_from_arn(backend, arn):
            resource = original_resource(backend, arn)
            if resource is None:  # SageMaker's answer for a tag call on a resource that is gone (moto: a 500)
                from moto.sagemaker.exceptions import ValidationError

                raise ValidationError(message=f"Could not find resource {arn}")
            return resource

        def refuse_duplicate(backend, store: dict, kind: str, arn_kind: str, name: str) -> None:
            if name in store:  # SageMaker's own answer; moto would silently overwrite
                from moto.sagemaker.exceptions import ValidationError

                arn = f"arn:aws:sagemaker:{backend.region_name}:{backend.account_id}:{arn_kind}/{name.lower()}"
                raise ValidationError(message=f'Cannot create already existing {kind} "{arn}".')

        def create_model(backend, model_name, *args, **kwargs):
            refuse_duplicate(backend, backend._models, "model", "model", model_name)
            return original_create_model(backend, model_name, *args, **kwargs)

        def create_endpoint_config(backend, endpoint_config_name, *args, **kwargs):
            refuse_duplicate(backend, backend.endpoint_configs, "endpoint configuration", "endpoint-config",
                             endpoint_config_name)
            emulator._capacity_check_config(backend, kwargs.get("production_variants", args[0] if args else None))
            return original_create_config(backend, endpoint_config_name, *args, **kwargs)

        def call_action(response_self):
            import time

            action = response_self._get_action()
            caller, names = _caller(response_self), _names(response_self)
            injected, after = emulator._before_action(action, caller, names)
            if injected is not None:
                return injected
            if emulator._delays.get(action):
                time.sleep(emulator._delays[action])
            gate = emulator._take_gate(action, caller, names)
            if gate is not None and gate.when == "before":
                gate.hold()
            try:
                answer = original_call(response_self)
                if action == "CreateModel":
                    _keep_network_isolation(response_self)
                return answer if after is None else json_error(after.status, after.code, after.message)
            finally:
                if gate is not None:
                    if gate.when == "after":
                        gate.hold()
                    gate.done.set()

        def validate_instance_type(config_self, instance_type):
            if instance_type.startswith(("ml.g7e.", "ml.g6e.", "ml.p5", "ml.p6")):
                return None
            return original_validate(config_self, instance_type)

        def create_endpoint(backend, endpoint_name, endpoint_config_name, tags):
            refuse_duplicate(backend, backend.endpoints, "endpoint", "endpoint", endpoint_name)
            config = backend.endpoint_configs.get(endpoint_config_name)
            emulator._capacity_check_quota(backend, config)
            endpoint = original_create(backend, endpoint_name, endpoint_config_name, tags)
            if emulator._capacity_provision(backend, endpoint, config):  # else Creating, waiting for capacity
                emulator._start_endpoint(backend, endpoint)
            return endpoint

        def describe_endpoint(backend, endpoint_name):
            endpoint = backend.endpoints.get(endpoint_name)
            if endpoint is not None and emulator._capacity_advance(backend, endpoint):  # provisioned just now
                emulator._start_endpoint(backend, endpoint)
            script = emulator._script
            if endpoint is not None and endpoint_name in script.seen and endpoint.endpoint_status == "Creating":
                script.seen[endpoint_name] += 1
                if script.seen[endpoint_name] > script.creating_polls:
                    endpoint.endpoint_status = script.final
                    endpoint.failure_reason = script.reason
            if endpoint is not None:
                emulator._advance_update(backend, endpoint)
            described = original_describe(backend, endpoint_name)
            pending = emulator._updates.get(endpoint_name)
            if pending is not None and described.get("EndpointStatus") == "Updating":
                described = {**described, "PendingDeploymentSummary": {
                    "EndpointConfigName": pending.new_config, "StartTime": pending.started}}
            with emulator._lock:
                emulator.status_history.setdefault(endpoint_name, []).append(described["EndpointStatus"])
            return described

        def delete_endpoint(backend, endpoint_name):
            original_delete(backend, endpoint_name)
            if emulator.backend is not None:
                emulator.backend.stop(endpoint_name)

        def update_endpoint(response_self):
            from moto.core.responses import ActionResult

            body = json.loads(response_self.body or "{}")
            arn = emulator._start_update(response_self.sagemaker_backend, body)
            return ActionResult({"EndpointArn": arn})

        def list_service_quotas(response_self):
            body = {"Quotas": emulator._quota_list(response_self.region)}
            return 200, {"Content-Type": "application/x-amz-json-1.1"}, json.dumps(body)

        from .acceptance_emulation import logs_patches

        return [
            *self._logs_patches(),
            *logs_patches(),  # metric filters applied to what is ingested
            mock.patch.object(SageMakerResponse, "call_action", call_action),
            mock.patch.object(LogsResponse, "call_action", call_action),  # faults and gates for CloudWatch Logs too
            mock.patch.object(ServiceQuotasResponse, "call_action", call_action),  # and for Service Quotas
            mock.patch.object(sm_models.FakeEndpointConfig, "validate_instance_type", validate_instance_type),
            mock.patch.object(sm_models.SageMakerModelBackend, "create_endpoint", create_endpoint),
            mock.patch.object(sm_models.SageMakerModelBackend, "create_model", create_model),
            mock.patch.object(sm_models.SageMakerModelBackend, "_get_resource_from_arn", resource_from_arn),
            mock.patch.object(sm_models.SageMakerModelBackend, "create_endpoint_config", create_endpoint_config),
            mock.patch.object(sm_models.SageMakerModelBackend, "describe_endpoint", describe_endpoint),
            mock.patch.object(sm_models.SageMakerModelBackend, "delete_endpoint", delete_endpoint),
            mock.patch.object(ServiceQuotasResponse, "list_service_quotas", list_service_quotas, create=True),
            mock.patch.object(SageMakerResponse, "update_endpoint", update_endpoint, create=True),
            *self._autoscaling_patches(call_action),
            *self.components.patches(call_action),  # entered after the patches above: stacks on them
            stubber_patch(self),  # in-process mode: the Pricing API (server mode: pricing_middleware)
            *self._capacity_patches(),
            *_router_patches(self),  # entered last: they stack on the patches above
        ]

    def _start_endpoint(self, backend: Any, endpoint: Any) -> None:
        """Once its instances are provisioned: the container backend runs the endpoint (the model its instances
        serve), or the script decides its status."""
        if self.backend is not None:
            self.backend.on_create(backend, endpoint, model_name=self._capacity_model(endpoint))
            return
        if self._script.creating_polls or self._script.final != "InService":
            endpoint.endpoint_status = "Creating"
        else:
            endpoint.endpoint_status = "InService"
        self._script.seen[endpoint.endpoint_name] = 0

    # UpdateEndpoint (moto has none) -------------------------------------------------------------
    def _start_update(self, backend: Any, body: dict[str, Any]) -> str:
        """SageMaker's checks, then Updating; `_advance_update` finishes it on later describes."""
        from moto.sagemaker.exceptions import ValidationError

        name, config = body.get("EndpointName", ""), body.get("EndpointConfigName", "")
        endpoint = backend.endpoints.get(name)
        arn_base = f"arn:aws:sagemaker:{backend.region_name}:{backend.account_id}"
        if endpoint is None:
            raise ValidationError(message=f"Could not find endpoint '{arn_base}:endpoint/{name.lower()}'.")
        if config not in backend.endpoint_configs:
            raise ValidationError(
                message=f"Could not find endpoint configuration '{arn_base}:endpoint-config/{config.lower()}'.")
        if endpoint.endpoint_status != "InService":
            raise ValidationError(message=f"Cannot update in-progress endpoint '{endpoint.arn}'.")
        self._capacity_start_update(backend, endpoint, backend.endpoint_configs[config])  # quota, then instances
        with self._lock:
            self.update_requests.append(body)
            import time

            from .acceptance_emulation import NewFleetLog, rollback_alarms

            script = self._update_script
            self._updates[name] = _PendingUpdate(
                config, script, started=time.time(), rollback_alarms=rollback_alarms(body),
                fleet_log=NewFleetLog(list(script.new_fleet_logs), self.clock()) if script.new_fleet_logs else None)
        endpoint.endpoint_status = "Updating"
        endpoint.failure_reason = None
        return endpoint.arn

    def _advance_update(self, backend: Any, endpoint: Any) -> None:
        from moto.core.utils import utcnow

        with self._lock:
            pending = self._updates.get(endpoint.endpoint_name)
            if pending is None or endpoint.endpoint_status != "Updating":
                return
        capacity = self._capacity_advance_update(backend, endpoint)  # "": the new instances are still awaited
        if capacity == "":
            return
        tripped = self._guardrails(backend, endpoint, pending) if capacity is None else None
        with self._lock:
            pending.seen += 1
            if capacity is None and tripped is None and pending.seen <= pending.script.updating_polls:
                return
            del self._updates[endpoint.endpoint_name]
        config = backend.endpoint_configs.get(pending.new_config)
        if capacity is not None:  # no capacity for the new config within its timeout: rolled back
            endpoint.failure_reason = capacity
        elif tripped is not None:  # a rollback alarm went to ALARM: SageMaker's guardrails roll back
            from .acceptance_emulation import rollback_reason

            endpoint.failure_reason = rollback_reason(tripped)
        elif pending.script.fail:  # rolled back: the old fleet keeps serving
            endpoint.failure_reason = pending.script.reason
        elif config is None:  # deleted while the update ran: the emulator fails the update (docs/ci.md)
            endpoint.failure_reason = (f"Endpoint configuration {pending.new_config} was deleted while the endpoint "
                                       "was updating to it (emulated); the update was rolled back")
        else:
            endpoint.endpoint_config_name = pending.new_config
            endpoint.production_variants = endpoint._process_production_variants(config.production_variants)
        self._capacity_finish_update(endpoint, applied=capacity is None and tripped is None and not pending.script.fail
                                     and config is not None)
        endpoint.endpoint_status = "InService"
        endpoint.last_modified_time = utcnow()

    def _guardrails(self, backend: Any, endpoint: Any, pending: _PendingUpdate) -> str | None:
        """While the update runs: the new fleet's scripted log lines up to `clock()`, then the first rollback alarm
        in ALARM (None: none), as `alarm_emulation` last evaluated it."""
        from moto.logs.models import logs_backends

        from .acceptance_emulation import tripped

        if pending.fleet_log is not None:
            logs = logs_backends[backend.account_id][backend.region_name]
            pending.fleet_log.catch_up(logs, f"/aws/sagemaker/Endpoints/{endpoint.endpoint_name}", self.clock())
        return tripped(backend.account_id, backend.region_name, pending.rollback_alarms)

    # Application Auto Scaling (h9) ----------------------------------------------------------------
    def _autoscaling_patches(self, call_action: Callable[[Any], Any]) -> list[Any]:
        """Faults, gates and delays through the same `call_action` as SageMaker's; entered after the patches
        above, so they stack on the emulator's own DeleteEndpoint."""
        from .autoscaling_emulation import autoscaling_patches

        return autoscaling_patches(self, call_action)

    def scalable_targets(self, region: str | None = None) -> dict[str, dict[str, Any]]:
        """Every registered Application Auto Scaling target (resource id -> min, max, policy names), from moto."""
        from moto.applicationautoscaling.models import applicationautoscaling_backends

        backend = applicationautoscaling_backends[ACCOUNT][region or self.region]
        found: dict[str, dict[str, Any]] = {}
        for targets in backend.targets.values():
            for r_id, target in targets.items():
                found[r_id] = {"min": target.min_capacity, "max": target.max_capacity, "policies": sorted(
                    p.policy_name for p in backend.policies.values() if p.resource_id == r_id)}
        return found
    def _logs_patches(self) -> list[Any]:
        """CloudWatch Logs: FilterLogEvents always interleaves the group's streams by time, as AWS has since
        2019 (its `interleaved` flag is ignored); moto interleaves only when asked."""
        from moto.logs.models import LogGroup

        original = LogGroup.filter_log_events

        def filter_log_events(group, log_group_name, log_stream_names, start_time, end_time, limit, next_token,
                              filter_pattern, interleaved):
            return original(group, log_group_name, log_stream_names, start_time, end_time, limit, next_token,
                            filter_pattern, True)

        return [mock.patch.object(LogGroup, "filter_log_events", filter_log_events)]

    def _seed(self) -> None:
        for region in self.regions:
            self.seed_region(region)

    # modes --------------------------------------------------------------------------------------
    @classmethod
    @contextmanager
    def in_process(cls, region: str = "us-east-1", seed_jumpstart: bool = True,
                   backend: Any = None, regions: tuple[str, ...] = ()) -> Iterator[SageMakerEmulator]:
        """moto's mock_aws around this process's boto3 calls, with fake credentials set."""
        from moto import mock_aws

        emulator = cls(region, backend, regions)
        with ExitStack() as stack:
            stack.enter_context(mock.patch.dict(os.environ, {**FAKE_CREDENTIALS, "AWS_DEFAULT_REGION": region,
                                                             "AWS_MAX_ATTEMPTS": str(MAX_ATTEMPTS)}))
            for name in ("AWS_ENDPOINT_URL", "AWS_PROFILE"):
                stack.enter_context(_without_env(name))
            stack.enter_context(mock_aws())
            for patch in emulator._patches():
                stack.enter_context(patch)
            if backend is not None:
                stack.callback(backend.stop_all)
            if seed_jumpstart:
                emulator._seed()
            yield emulator

    @classmethod
    @contextmanager
    def server(cls, region: str = "us-east-1", seed_jumpstart: bool = True,
               middlewares: list[Middleware] | None = None, set_env: bool = True,
               backend: Any = None, regions: tuple[str, ...] = (), port: int = 0) -> Iterator[SageMakerEmulator]:
        """moto's server on 127.0.0.1 (`port`, default a free one) in a thread; `emulator.env` is for subprocesses.

        With set_env (default) this process's environment points at it too, until the block ends.
        """
        from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
        from werkzeug.serving import ThreadedWSGIServer, WSGIRequestHandler

        from .server_threads import ClosingThreadingMixIn

        class Server(ClosingThreadingMixIn, ThreadedWSGIServer):
            """werkzeug's threaded server; closing it (its serve_forever does, once shut down) ends its requests."""

        class QuietHandler(WSGIRequestHandler):
            def log_request(self, *args: Any, **kwargs: Any) -> None:  # keep test output readable
                pass

            def setup(self) -> None:
                super().setup()  # werkzeug writes a streamed chunk in several small sends: no Nagle delay
                import socket

                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        from moto.core.models import MockAWS  # noqa: F401 - registers moto's backends
        from moto import settings

        from .openai_route import openai_route_middleware
        from .streaming import runtime_middleware

        emulator = cls(region, backend, regions)
        app: Any = DomainDispatcherApplication(create_backend_app)
        # which moto backend serves a host: moto works it out on every request (a listing of its own package
        # folder, then its URL patterns one by one: about 9% of a scenario's CPU); the answer depends on the host only
        app.get_backend_for_host = functools.lru_cache(maxsize=None)(app.get_backend_for_host)
        from .inference_router_emulation import router_middleware

        for middleware in [runtime_middleware, openai_route_middleware, pricing_middleware, *([backend.middleware] if backend else []),
                           router_middleware, *(middlewares or [])]:
            app = middleware(app, emulator)
        server = Server("127.0.0.1", port, app, QuietHandler)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        with ExitStack() as stack:
            stack.enter_context(mock.patch.object(settings, "TEST_SERVER_MODE", False))
            for patch in emulator._patches():
                stack.enter_context(patch)
            thread.start()
            stack.callback(server.server_close)  # serve_forever's own last step; again here in case it never ran
            stack.callback(thread.join, 10)
            stack.callback(server.shutdown)
            stack.callback(emulator.closing.set)  # first: a stalled answer's thread ends before the server joins it
            emulator.endpoint_url = f"http://127.0.0.1:{server.server_port}"
            emulator.reset()  # moto's backends are process-wide: start from nothing, leave nothing
            stack.callback(emulator.reset)
            if backend is not None:
                stack.callback(backend.stop_all)  # first on exit: no container outlives the emulator
            if set_env:
                stack.enter_context(mock.patch.dict(os.environ, {
                    **FAKE_CREDENTIALS, "AWS_ENDPOINT_URL": emulator.endpoint_url, "AWS_DEFAULT_REGION": region,
                    "AWS_MAX_ATTEMPTS": str(MAX_ATTEMPTS)}))
            if seed_jumpstart:
                emulator._seed()
            yield emulator


def _router_patches(emulator: SageMakerEmulator) -> list[Any]:
    from .inference_router_emulation import router_patches

    return router_patches(emulator)


def _keep_network_isolation(response_self: Any) -> None:
    """moto drops CreateModel's EnableNetworkIsolation (its DescribeModel always says False); SageMaker keeps it, and
    `peagle update` copies the live value into the new model, so the emulator keeps it too."""
    from moto.sagemaker.models import sagemaker_backends

    try:
        body = json.loads(getattr(response_self, "body", None) or "{}")
    except (TypeError, ValueError):
        return
    model = sagemaker_backends[ACCOUNT][response_self.region]._models.get(body.get("ModelName"))
    if model is not None and isinstance(body.get("EnableNetworkIsolation"), bool):
        model.enable_network_isolation = body["EnableNetworkIsolation"]


def _caller(response_self: Any) -> str | None:
    """The request's AWS_SDK_UA_APP_ID (botocore adds `app/<id>` to its User-Agent), if any."""
    import re

    headers = getattr(response_self, "headers", None) or {}
    match = re.search(r"\bapp/(\S+)", str(headers.get("User-Agent") or headers.get("user-agent") or ""))
    return match.group(1) if match else None


def _names(response_self: Any) -> frozenset[str]:
    """The resource names a JSON request carries (EndpointName, ModelName, ...; a ResourceArn's last part)."""
    try:
        body = json.loads(getattr(response_self, "body", None) or "{}")
    except (TypeError, ValueError):
        return frozenset()
    if not isinstance(body, dict):
        return frozenset()
    names = {v for k, v in body.items() if isinstance(v, str) and (k.endswith("Name") or k == "ResourceId")}
    names |= {v.rsplit("/", 1)[-1] for k, v in body.items() if k == "ResourceArn" and isinstance(v, str)}
    return frozenset(names)


@contextmanager
def _without_env(name: str) -> Iterator[None]:
    value = os.environ.pop(name, None)
    try:
        yield
    finally:
        if value is not None:
            os.environ[name] = value
