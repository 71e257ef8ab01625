"""The CLI's start-up cost beside what it cannot avoid: whole processes, interleaved pairs, in one run.

Pairs (A = peagle, B = the baseline), each run in turn A B A B ... `--pairs` times after one warm-up:

- `help`:   `peagle --help` against a Typer app with the same commands, options and help texts (generated
            from peagle's own command tree into a temporary file, importing nothing of peagle).
- `status`: `peagle status --json` with 5 peagle endpoints against a bare boto3 script making the same
            AWS calls (ListEndpoints; per endpoint ListTags, DescribeEndpoint, DescribeEndpointConfig,
            DescribeModel and GetProducts (the emulator's prices are not cached); Application Auto Scaling's
            targets; the unused-config scan: ListEndpoints, ListEndpointConfigs, ListModels, describing only
            what the rows did not), both against the same SageMaker emulator (moto, a thread of this process).
            The script checks that both made the same API calls and says so when they differ. A third command
            runs in each round, the floor: the same-commands Typer app (as for `help`) whose `status` makes the
            script's calls, i.e. Typer's own start-up and parameter conversion (pydantic) on top of the script.
- `dry-run`: `peagle deploy qwen3-coder --dry-run` without credentials against importing the sagemaker-core
            modules it calls (the spec look-ups) and nothing else.

Each figure is the child's own CPU time (user + sys, from wait4) and its wall time; the ratio A/B is taken
pair by pair and reported as median, min and max. `--importtime` also prints the modules with the largest
cumulative import time for each peagle command (python -X importtime).

    .venv/bin/python benchmarks/bench_startup.py [--pairs 15] [--only help,status,dry-run] [--importtime]
        [--instructions] [--tree PATH] [--first-on-path DIR] [--no-floor] [--json]

`--instructions` also counts each command's instructions once under valgrind's callgrind (slow, but the
same count however loaded the machine is); `--tree` times another checkout's peagle (before and after);
`--first-on-path` puts a folder first on every child's PYTHONPATH (another Typer's wheel, unpacked). The timed
tree is compiled first (`compileall`), as pip compiles a wheel at install.

Results are in docs/performance.md, "CLI start-up".
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

PEAGLE = [sys.executable, "-c", "import sys; from peagle_deploy.cli.app import main; main(sys.argv[1:])"]
ENDPOINTS = 5


def typer_baseline_source(status_body: str = "pass") -> str:
    """A Typer app with peagle's commands, options and help texts, and nothing else (`status_body`: what its
    `status` command runs; the status floor runs the bare boto3 script's calls there)."""
    import typer.main

    from peagle_deploy.cli.app import app

    lines = ["import typer", "from pathlib import Path", "from typing import Annotated, Optional", ""]
    counter = [0]

    def py_type(param) -> tuple[str, str]:
        default = param.default if not callable(param.default) else None
        if getattr(param, "is_flag", False):
            return "bool", repr(bool(default))
        bare = param.bare_type()
        name = bare.__name__ if isinstance(bare, type) and bare.__name__ in ("int", "float", "bool", "Path") else "str"
        if default is None or (isinstance(default, (tuple, list)) and not default):
            return f"Optional[{name}]", "None"
        return name, repr(str(default) if name in ("str", "Path") else default)

    def emit(group, var: str) -> None:
        for name, cmd in group.commands.items():
            counter[0] += 1
            if hasattr(cmd, "commands"):
                sub = f"group{counter[0]}"
                lines.append(f"{sub} = typer.Typer(no_args_is_help=True, rich_markup_mode='rich', help={cmd.help!r})")
                lines.append(f"{var}.add_typer({sub}, name={name!r})")
                emit(cmd, sub)
                continue
            params = []
            for p in cmd.params:
                kind, default = py_type(p)
                if p.param_type_name == "argument":
                    spec = "typer.Argument()"
                else:
                    decls = ", ".join(repr(o) for o in [*p.opts, *p.secondary_opts])
                    spec = f"typer.Option({decls}, help={p.help!r})"
                params.append(f"    {p.name}: Annotated[{kind}, {spec}] = {default},")
            lines.append(f"@{var}.command({name!r}, help={cmd.help!r})")
            lines.append(f"def cmd{counter[0]}(")
            lines.extend(params)
            body = status_body if name == "status" else "pass"
            lines.append("):\n" + textwrap.indent(body, "    ") + "\n")

    root = typer.main.get_command(app)
    lines.append(f"app = typer.Typer(name='peagle', no_args_is_help=True, rich_markup_mode='rich', "
                 f"context_settings={{'help_option_names': ['-h', '--help']}}, help={root.help!r})")
    lines.append("@app.callback()\ndef _root(version: Annotated[bool, typer.Option('--version')] = False):\n    pass\n")
    emit(root, "app")
    lines.append("if __name__ == '__main__':\n    app(prog_name='peagle')")
    return "\n".join(lines) + "\n"


STATUS_BASELINE = textwrap.dedent('''
    import json
    import boto3

    session = boto3.session.Session()
    sm = session.client("sagemaker")
    pricing = session.client("pricing", region_name="us-east-1")
    QUERY = {"ServiceCode": "AmazonSageMaker", "FormatVersion": "aws_v1", "Filters": [
        {"Type": "TERM_MATCH", "Field": "productFamily", "Value": "ML Instance"},
        {"Type": "TERM_MATCH", "Field": "platoinstancetype", "Value": "Hosting"},
        {"Type": "TERM_MATCH", "Field": "regionCode", "Value": session.region_name},
        {"Type": "TERM_MATCH", "Field": "instanceName", "Value": ""}]}
    rows = []
    described, configs = {}, {}
    for page in sm.get_paginator("list_endpoints").paginate():
        for summary in page["Endpoints"]:
            tags = {t["Key"]: t["Value"] for t in sm.list_tags(ResourceArn=summary["EndpointArn"])["Tags"]}
            if tags.get("peagle:managed") != "true":
                continue
            d = sm.describe_endpoint(EndpointName=summary["EndpointName"])
            described[summary["EndpointName"]] = d
            config = configs[d["EndpointConfigName"]] = sm.describe_endpoint_config(
                EndpointConfigName=d["EndpointConfigName"])
            variant = config["ProductionVariants"][0]
            model = sm.describe_model(ModelName=variant["ModelName"])
            env = (model.get("PrimaryContainer") or model["Containers"][0]).get("Environment", {})
            query = json.loads(json.dumps(QUERY))
            query["Filters"][-1]["Value"] = variant.get("InstanceType", "")
            price = [p for page in pricing.get_paginator("get_products").paginate(**query) for p in page["PriceList"]]
            rows.append({"name": d["EndpointName"], "status": d["EndpointStatus"], "tags": tags,
                         "speculative": env.get("SM_VLLM_SPECULATIVE_CONFIG"), "prices": len(price)})
    if rows:
        aas = session.client("application-autoscaling")
        targets = [t for page in aas.get_paginator("describe_scalable_targets").paginate(
            ServiceNamespace="sagemaker", ScalableDimension="sagemaker:variant:DesiredInstanceCount")
            for t in page["ScalableTargets"]]
        if targets:
            policies = [p for page in aas.get_paginator("describe_scaling_policies").paginate(
                ServiceNamespace="sagemaker") for p in page["ScalingPolicies"]]
    # who uses what (peagle's unused-config scan): every endpoint, every config, every model (what the rows
    # already described is not described again)
    in_use = set()
    for page in sm.get_paginator("list_endpoints").paginate():
        for summary in page["Endpoints"]:
            name = summary["EndpointName"]
            d = described.get(name) or sm.describe_endpoint(EndpointName=name)
            in_use.add(d["EndpointConfigName"])
    held = set()
    for page in sm.get_paginator("list_endpoint_configs").paginate():
        for summary in page["EndpointConfigs"]:
            name = summary["EndpointConfigName"]
            config = configs.get(name) or sm.describe_endpoint_config(EndpointConfigName=name)
            held.update(v["ModelName"] for v in config["ProductionVariants"])
    models = [m for page in sm.get_paginator("list_models").paginate() for m in page["Models"]]
    print(json.dumps({"endpoints": rows, "unused": []}, default=str))
''')

DRY_RUN_BASELINE = ("import sagemaker.core.jumpstart.accessors, sagemaker.core.jumpstart.artifacts, "
                    "sagemaker.core.image_uris, sagemaker.core.model_uris, sagemaker.core.environment_variables")


NEUTRAL_DIR = tempfile.gettempdir()  # children start here: `python -c` puts the working directory first on sys.path


def run_once(cmd: list[str], env: dict[str, str]) -> tuple[float, float, int]:
    """(CPU seconds, wall seconds, exit code) of one whole process."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=NEUTRAL_DIR)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    return usage.ru_utime + usage.ru_stime, wall, proc.returncode


def instructions(cmd: list[str], env: dict[str, str]) -> int | None:
    """Instructions one run of `cmd` executes (valgrind's callgrind: the same count whatever the load)."""
    import re
    import shutil

    if shutil.which("valgrind") is None:
        return None
    out = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *cmd],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env, cwd=NEUTRAL_DIR)
    found = re.search(r"Collected : (\d+)", out.stderr)
    return int(found.group(1)) if found else None


def pairs(a: list[str], b: list[str], env: dict[str, str], n: int, count: bool = False,
          c: list[str] | None = None) -> dict:
    """A and B in turn, n times (with `c`, a third command in each round: A B C A B C ...)."""
    run_once(a, env), run_once(b, env)  # warm-up: page cache
    if c:
        run_once(c, env)
    rows, third = [], []
    for _ in range(n):
        ra, rb = run_once(a, env), run_once(b, env)
        rows.append((ra, rb))
        if c:
            third.append(run_once(c, env))
    codes = sorted({r[0][2] for r in rows}), sorted({r[1][2] for r in rows})

    def spread(values: list[float]) -> dict:
        return {"median": statistics.median(values), "min": min(values), "max": max(values)}

    counted = {}
    if count:
        ia, ib = instructions(a, env), instructions(b, env)
        counted = {"a_instructions": ia, "b_instructions": ib,
                   "instructions_ratio": ia / ib if ia and ib else None}
    if c:
        counted.update({"c_cpu_s": spread([rc[0] for rc in third]), "c_exit_codes": sorted({rc[2] for rc in third}),
                        "c_over_b_cpu_ratio": spread([rc[0] / rb[0] for rc, (_, rb) in zip(third, rows)]),
                        "a_over_c_cpu_ratio": spread([ra[0] / rc[0] for rc, (ra, _) in zip(third, rows)])})
    return {
        **counted,
        "a_cpu_s": spread([ra[0] for ra, _ in rows]), "b_cpu_s": spread([rb[0] for _, rb in rows]),
        "a_wall_s": spread([ra[1] for ra, _ in rows]), "b_wall_s": spread([rb[1] for _, rb in rows]),
        "cpu_ratio": spread([ra[0] / rb[0] for ra, rb in rows]),
        "wall_ratio": spread([ra[1] / rb[1] for ra, rb in rows]),
        "exit_codes": codes, "pairs": n,
    }


def importtime(cmd: list[str], env: dict[str, str], top: int = 12) -> list[tuple[str, float]]:
    """The modules with the largest cumulative import time (ms) when `cmd` runs under -X importtime."""
    out = subprocess.run([cmd[0], "-X", "importtime", *cmd[1:]], capture_output=True, text=True, env=env,
                         cwd=NEUTRAL_DIR)
    rows = []
    for line in out.stderr.splitlines():
        parts = line[len("import time:"):].split("|") if line.startswith("import time:") else []
        if len(parts) != 3 or not parts[1].strip().isdigit():
            continue
        name = parts[2].rstrip()
        depth = (len(name) - len(name.lstrip())) // 2
        if depth <= 1:  # imported by the program or by a module it imported directly
            rows.append((name.strip(), int(parts[1]) / 1000))
    return sorted(rows, key=lambda r: -r[1])[:top]


def heavy_modules(cmd: list[str], env: dict[str, str]) -> list[str]:
    """Top-level packages of the heavy kind that `cmd` imports (boto3, botocore, sagemaker, pydantic...)."""
    probe = ("import sys, runpy; sys.argv = ['peagle', *sys.argv[1:]]\n"
             "from peagle_deploy.cli.app import main\n"
             "try:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
             "heavy = ('boto3', 'botocore', 'sagemaker', 'pydantic', 'aiohttp', 'pandas', 'numpy', 'rich.table')\n"
             "print(' '.join(sorted({m.split('.')[0] for m in sys.modules if m.startswith(heavy)})), file=sys.stderr)")
    out = subprocess.run([sys.executable, "-c", probe, *cmd], capture_output=True, text=True, env=env,
                         cwd=NEUTRAL_DIR)
    return out.stderr.strip().splitlines()[-1].split() if out.stderr.strip() else []


def seed_endpoints(emulator) -> None:
    from peagle_deploy.tags import PeagleTags

    for i in range(ENDPOINTS):
        tags = PeagleTags(managed=True, model="qwen3-coder", mode="p-eagle", k=7, instance_type="ml.g7e.2xlarge",
                          instance_count=1).to_aws()
        served = json.dumps({"method": "eagle3", "model": "/opt/ml/additional-model-data-sources/draft_model",
                             "num_speculative_tokens": 7, "parallel_drafting": True})
        emulator.create_endpoint_stack(f"peagle-bench-{i}", tags=[{"Key": k, "Value": v} for k, v in tags.items()],
                                       environment={"SM_VLLM_SPECULATIVE_CONFIG": served})  # as the tags say


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=15)
    parser.add_argument("--only", default="help,status,dry-run")
    parser.add_argument("--importtime", action="store_true")
    parser.add_argument("--instructions", action="store_true",
                        help="also count each command's instructions once (valgrind callgrind; slow, load-independent)")
    parser.add_argument("--tree", type=Path, default=ROOT,
                        help="the peagle checkout to time (e.g. one extracted with git archive); default this one")
    parser.add_argument("--first-on-path", type=Path,
                        help="a folder put first on every child's PYTHONPATH (e.g. another Typer's wheel, unpacked)")
    parser.add_argument("--no-floor", action="store_true",
                        help="status: leave out the third command (the same-commands Typer app running the script's calls)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    wanted = args.only.split(",")
    tree = str(args.tree.resolve())
    # As installed: pip compiles a wheel's modules at install. Without this, a tree never run with bytecode
    # writing on (PYTHONDONTWRITEBYTECODE, a fresh `git archive`) compiles peagle's modules from source on
    # every run (about 90 ms of status's CPU), while the baseline's boto3 was compiled by pip.
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(Path(tree) / "peagle_deploy")], check=True)
    if args.first_on_path:
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(args.first_on_path)], check=True)
        tree = f"{args.first_on_path.resolve()}{os.pathsep}{tree}"
    base_env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    base_env["PYTHONPATH"] = tree
    report: dict = {"load_avg_1m_before": os.getloadavg()[0], "python": sys.version.split()[0], "results": {}}
    with tempfile.TemporaryDirectory(prefix="peagle-startup-") as tmp:
        if "help" in wanted:
            baseline = Path(tmp) / "typer_same_commands.py"
            baseline.write_text(typer_baseline_source())
            report["results"]["help"] = pairs([*PEAGLE, "--help"], [sys.executable, str(baseline), "--help"],
                                              base_env, args.pairs, args.instructions)
            report["results"]["help"]["heavy_modules"] = heavy_modules(["--help"], base_env)
        if "dry-run" in wanted:
            env = {**base_env, "AWS_CONFIG_FILE": os.devnull, "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
                   "AWS_EC2_METADATA_DISABLED": "true"}
            report["results"]["dry-run"] = pairs([*PEAGLE, "deploy", "qwen3-coder", "--dry-run"],
                                                 [sys.executable, "-c", DRY_RUN_BASELINE], env, args.pairs,
                                                 args.instructions)
        if "status" in wanted:
            from peagle_deploy.testing import SageMakerEmulator
            from peagle_deploy.testing.write_recorder import WriteRecorder

            recorder = WriteRecorder()
            with SageMakerEmulator.server(middlewares=[recorder.middleware], set_env=False) as emu:
                seed_endpoints(emu)
                env = {**emu.env, "PYTHONPATH": tree}
                script = Path(tmp) / "status_boto3.py"
                script.write_text(STATUS_BASELINE)
                floor = Path(tmp) / "typer_status_boto3.py"
                floor.write_text(typer_baseline_source(status_body=STATUS_BASELINE))
                peagle_status = [*PEAGLE, "status", "--json"]
                script_cmd = [sys.executable, str(script)]
                floor_cmd = [sys.executable, str(floor), "status", "--json"]
                for who, cmd in (("peagle", peagle_status), ("boto3", script_cmd), ("typer", floor_cmd)):
                    subprocess.run(cmd, env={**env, "AWS_SDK_UA_APP_ID": who}, capture_output=True, cwd=NEUTRAL_DIR)
                calls = {who: [op for caller, op in recorder.calls if caller == who]
                         for who in ("peagle", "boto3", "typer")}
                result = pairs(peagle_status, script_cmd, env, args.pairs, args.instructions,
                               c=floor_cmd if not args.no_floor else None)
                result["api_calls"] = calls["peagle"]
                result["same_calls"] = sorted(calls["peagle"]) == sorted(calls["boto3"])
                result["floor_same_calls"] = sorted(calls["typer"]) == sorted(calls["boto3"])
                report["results"]["status"] = result
        if args.importtime:
            report["importtime"] = {"--help": importtime([*PEAGLE, "--help"], base_env),
                                    "status --help": importtime([*PEAGLE, "status", "--help"], base_env)}
    report["load_avg_1m_after"] = os.getloadavg()[0]
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"load {report['load_avg_1m_before']:.2f} before, {report['load_avg_1m_after']:.2f} after; "
          f"Python {report['python']}; {args.pairs} interleaved pairs each")
    for name, r in report["results"].items():
        c, w = r["cpu_ratio"], r["wall_ratio"]
        print(f"{name:8s} peagle CPU {r['a_cpu_s']['median'] * 1000:6.0f} ms, baseline {r['b_cpu_s']['median'] * 1000:6.0f}"
              f" ms; CPU ratio median {c['median']:.2f} (min {c['min']:.2f}, max {c['max']:.2f}); wall ratio median "
              f"{w['median']:.2f} (min {w['min']:.2f}, max {w['max']:.2f}); exit codes {r['exit_codes']}")
        if r.get("instructions_ratio"):
            print(f"         instructions (callgrind, one run each): {r['a_instructions']:,} / {r['b_instructions']:,}"
                  f" = {r['instructions_ratio']:.2f}")
        if "heavy_modules" in r:
            print(f"         heavy modules imported by peagle --help: {r['heavy_modules'] or 'none'}")
        if "same_calls" in r:
            print(f"         same AWS calls as the baseline: {r['same_calls']} ({len(r['api_calls'])} calls)")
        if "c_cpu_s" in r:
            f, af = r["c_over_b_cpu_ratio"], r["a_over_c_cpu_ratio"]
            print(f"         floor (the same-commands Typer app running the script's calls; same calls: "
                  f"{r['floor_same_calls']}): CPU {r['c_cpu_s']['median'] * 1000:.0f} ms, floor / baseline "
                  f"{f['median']:.2f} ({f['min']:.2f}-{f['max']:.2f}), peagle / floor {af['median']:.2f} "
                  f"({af['min']:.2f}-{af['max']:.2f})")
    for cmd, rows in report.get("importtime", {}).items():
        print(f"peagle {cmd}: largest cumulative imports: " + ", ".join(f"{n} {ms:.0f} ms" for n, ms in rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
