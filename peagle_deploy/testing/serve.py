"""The emulator from a shell (like moto's own `moto_server`): `python -m peagle_deploy.testing serve`.

It starts `SageMakerEmulator.server()` on 127.0.0.1, prints the `export` lines a shell needs (AWS_ENDPOINT_URL, fake
credentials, the region, the role ARN to deploy with, and PEAGLE_POLL_INTERVAL_S=0 so that peagle's waits and
wake-ups poll without pausing) and serves until SIGINT or SIGTERM, when it stops its server, forgets every resource
and removes its `--env-file`. What a test does in Python with the emulator object, a shell does through its control
route, `POST /peagle-emulator/...` on the same port, or the commands below, which read AWS_ENDPOINT_URL:

    python -m peagle_deploy.testing advance 1200          # move the emulated clock (--clock manual)
    python -m peagle_deploy.testing script --creating-polls 3 --final Failed --reason "..."
    python -m peagle_deploy.testing script --capacity ml.g7e.2xlarge=0 --quota ml.g7e.4xlarge=1
    python -m peagle_deploy.testing state                 # the emulated time and what exists (JSON)

`--clock manual` starts the emulated clock at now and moves it only when told (`advance`), and `--per-call-s S`
also by S at every AWS call it answers (what `ManualClock(per_call_s=S)` does in Python): a `peagle invoke` waking a
component at zero then takes a bounded number of calls and no real time (docs/ci.md).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

CONTROL = "/peagle-emulator/"
ROLE_VARIABLE = "PEAGLE_EMULATOR_ROLE"


def export_lines(emu: Any) -> list[str]:
    """The shell's `export` lines for peagle (and boto3, the AWS CLI) to use this emulator."""
    import shlex

    names = ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_REGION",
             "AWS_DEFAULT_REGION", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE", "AWS_EC2_METADATA_DISABLED",
             "AWS_MAX_ATTEMPTS")
    env = emu.env
    values = {name: env[name] for name in names if name in env}
    values.update({"PEAGLE_POLL_INTERVAL_S": "0", ROLE_VARIABLE: emu.role_arn})
    return [f"export {name}={shlex.quote(value)}" for name, value in values.items()]


# scripts: what a shell may ask the emulator to do ----------------------------------------------------------------

def _pairs(values: Iterable[str], what: str) -> list[tuple[str, float]]:
    out = []
    for value in values:
        name, sep, count = value.partition("=")
        try:
            out.append((name, float(count)))
        except ValueError:
            sep = ""
        if not sep or not name:
            raise ValueError(f"{what} {value!r} is not INSTANCE_TYPE=N")
    return out


def apply_script(emu: Any, script: dict[str, Any]) -> dict[str, Any]:
    """Apply one control request (`script`'s keys, all optional) to the emulator; what it did, for the answer."""
    done: dict[str, Any] = {}
    endpoints = script.get("endpoints")
    if endpoints is not None:
        emu.script_endpoints(int(endpoints.get("creating_polls", 0)), endpoints.get("final", "InService"),
                             endpoints.get("reason"))
        done["endpoints"] = endpoints
    components = script.get("components")
    if components is not None:
        emu.components.script(**{k: components[k] for k in ("creating_polls", "final", "reason", "updating_polls",
                                                             "deleting_polls", "update_fails") if k in components})
        done["components"] = components
    if script.get("scaling"):
        emu.components.scaling(**{k: float(v) for k, v in script["scaling"].items()})
        done["scaling"] = script["scaling"]
    for instance_type, count in script.get("capacity", {}).items():
        emu.set_capacity(instance_type, None if count is None else int(count), region=script.get("region"))
        done.setdefault("capacity", {})[instance_type] = count
    for instance_type, value in script.get("quota", {}).items():
        emu.set_quota(instance_type, float(value), region=script.get("region"))
        done.setdefault("quota", {})[instance_type] = value
    if script.get("advance"):
        done["now"] = advance(emu, float(script["advance"]))
    return done


def advance(emu: Any, seconds: float) -> float:
    if not hasattr(emu.clock, "advance"):
        raise ValueError("the emulator runs on the real clock: start it with --clock manual to move its time")
    if seconds < 0:
        raise ValueError("the emulated clock moves forward only")
    return emu.clock.advance(seconds)


def control_middleware(app: Any, emu: Any) -> Any:
    """`POST /peagle-emulator/script` (a JSON script, `apply_script`), `POST /peagle-emulator/advance` ({"seconds":
    N}) and `GET /peagle-emulator/state`; every other request goes to the emulator."""

    def middleware(environ: dict[str, Any], start_response: Any) -> Any:
        path = environ.get("PATH_INFO", "")
        if not path.startswith(CONTROL):
            return app(environ, start_response)
        try:
            length = int(environ.get("CONTENT_LENGTH") or 0)
            body = json.loads(environ["wsgi.input"].read(length) or b"{}") if length else {}
            what = path[len(CONTROL):]
            if what == "script" and environ.get("REQUEST_METHOD") == "POST":
                answer = apply_script(emu, body)
            elif what == "advance" and environ.get("REQUEST_METHOD") == "POST":
                answer = {"now": advance(emu, float(body.get("seconds", 0)))}
            elif what == "state":
                answer = {"now": emu.clock(), "manual_clock": hasattr(emu.clock, "advance"),
                          "resources": emu.resource_names(), "components": emu.components.names()}
            else:
                raise LookupError(f"no control route {path}")
            status = "200 OK"
        except (ValueError, TypeError, LookupError) as exc:
            status, answer = "400 Bad Request", {"error": str(exc)}
        start_response(status, [("Content-Type", "application/json")])
        return [json.dumps(answer).encode()]

    return middleware


# the server ------------------------------------------------------------------------------------------------------

def serve(args: argparse.Namespace) -> int:
    from .component_emulation import ManualClock
    from .emulator import SageMakerEmulator

    regions = tuple(r for r in (args.regions or "").split(",") if r)
    stop = threading.Event()
    caught: list[str] = []

    def on_signal(signum: int, _frame: Any) -> None:
        caught.append(signal.Signals(signum).name)
        stop.set()

    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, on_signal)
    env_file = Path(args.env_file) if args.env_file else None
    with SageMakerEmulator.server(region=args.region, regions=regions, set_env=False, port=args.port,
                                  middlewares=[control_middleware]) as emu:
        if args.clock == "manual" or args.per_call_s:
            emu.clock = ManualClock(per_call_s=args.per_call_s or 0.0)
        apply_script(emu, _script_of(args))
        lines = export_lines(emu)
        if env_file is not None:
            partial = env_file.with_name(f".{env_file.name}.partial")
            partial.write_text("\n".join(lines) + "\n", encoding="utf-8")
            partial.replace(env_file)  # whole or not at all: a script may wait for the file to appear
        print("\n".join(lines), flush=True)
        print(f"# peagle's SageMaker emulator on {emu.endpoint_url} (pid {os.getpid()}); Ctrl-C or "
              f"kill {os.getpid()} stops it", file=sys.stderr, flush=True)
        try:
            while not stop.wait(0.5):
                pass
        finally:
            if env_file is not None:
                env_file.unlink(missing_ok=True)
    print(f"# emulator stopped ({caught[0] if caught else 'done'}): every resource forgotten", file=sys.stderr,
          flush=True)
    return 0


def _script_of(args: argparse.Namespace) -> dict[str, Any]:
    """The scripts given as options (of `serve` or `script`) as one control request."""
    script: dict[str, Any] = {}
    if args.creating_polls is not None or args.final is not None or args.reason is not None:
        script["endpoints"] = {"creating_polls": args.creating_polls or 0, "final": args.final or "InService",
                               "reason": args.reason}
    if args.component_creating_polls is not None or args.component_final is not None:
        script["components"] = {"creating_polls": args.component_creating_polls or 0,
                                "final": args.component_final or "InService", "reason": args.reason}
    scaling = {k: getattr(args, k) for k in ("instance_start_s", "copy_start_s", "instance_release_s")
               if getattr(args, k) is not None}
    if scaling:
        script["scaling"] = scaling
    if args.capacity:
        script["capacity"] = {name: int(count) for name, count in _pairs(args.capacity, "--capacity")}
    if args.quota:
        script["quota"] = dict(_pairs(args.quota, "--quota"))
    if getattr(args, "script_region", None):
        script["region"] = args.script_region
    return script


def _post(route: str, body: dict[str, Any]) -> dict[str, Any]:
    url = os.environ.get("AWS_ENDPOINT_URL")
    if not url:
        raise SystemExit("error: AWS_ENDPOINT_URL is not set: run the export lines 'serve' printed first")
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url.rstrip("/") + CONTROL + route, data=data, method="POST" if data else "GET",
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return json.loads(answer.read())
    except urllib.error.HTTPError as exc:
        raise SystemExit(f"error: {json.loads(exc.read() or b'{}').get('error', exc.reason)}") from None
    except (urllib.error.URLError, OSError) as exc:
        raise SystemExit(f"error: no emulator answers at {url} ({exc}): is 'serve' running?") from None


def _add_script_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--creating-polls", type=int, help="New endpoints stay Creating for N describes.")
    parser.add_argument("--final", choices=("InService", "Failed"), help="...then turn this (default InService).")
    parser.add_argument("--reason", help="The FailureReason of a Failed endpoint (or component).")
    parser.add_argument("--component-creating-polls", type=int, help="New inference components stay Creating for "
                                                                     "N describes.")
    parser.add_argument("--component-final", choices=("InService", "Failed"), help="...then turn this.")
    parser.add_argument("--capacity", action="append", metavar="TYPE=N", help="At most N instances of TYPE "
                                                                              "(repeatable; 0: none left).")
    parser.add_argument("--quota", action="append", metavar="TYPE=N", help="The Service Quotas value of TYPE for "
                                                                           "endpoint usage (repeatable).")
    parser.add_argument("--instance-start-s", type=float, help="Emulated seconds an instance takes to start.")
    parser.add_argument("--copy-start-s", type=float, help="Emulated seconds a component's copy takes to load.")
    parser.add_argument("--instance-release-s", type=float, help="Emulated seconds before an idle instance goes.")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m peagle_deploy.testing",
                                     description="peagle's SageMaker emulator, from a shell (docs/ci.md).")
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("serve", help="Start the emulator and print the export lines; Ctrl-C stops it.")
    run.add_argument("--port", type=int, default=0, help="Port on 127.0.0.1 (default: a free one).")
    run.add_argument("--region", default="us-east-1", help="The default region (JumpStart bucket seeded).")
    run.add_argument("--regions", help="More regions to seed, comma-separated.")
    run.add_argument("--env-file", help="Also write the export lines to this file (removed on stop).")
    run.add_argument("--clock", choices=("real", "manual"), default="real",
                     help="manual: the emulated time moves only with 'advance' (and --per-call-s).")
    run.add_argument("--per-call-s", type=float, default=0.0, help="With a manual clock: emulated seconds that pass "
                                                                   "at every AWS call answered.")
    _add_script_options(run)
    script = commands.add_parser("script", help="Script the running emulator (AWS_ENDPOINT_URL).")
    _add_script_options(script)
    script.add_argument("--region", dest="script_region", help="The region of --capacity and --quota.")
    move = commands.add_parser("advance", help="Move the running emulator's manual clock by SECONDS.")
    move.add_argument("seconds", type=float)
    commands.add_parser("state", help="The emulated time and every resource, as JSON.")
    args = parser.parse_args(argv)
    try:
        if args.command == "serve":
            return serve(args)
        if args.command == "script":
            answer = _post("script", _script_of(args))
        elif args.command == "advance":
            answer = _post("advance", {"seconds": args.seconds})
        else:
            answer = _post("state", None)
    except ValueError as exc:
        parser.error(str(exc))
    print(json.dumps(answer, indent=2, default=str))
    return 0
