"""`peagle --help` stays fast: it must not import boto3, botocore, the SageMaker SDK or huggingface_hub."""

import subprocess
import sys

HEAVY = ("boto3", "botocore", "sagemaker", "aiohttp", "matplotlib", "moto", "huggingface_hub", "httpx")


def _modules_after(code: str) -> set[str]:
    probe = code + "\nimport sys\nprint('\\n'.join(sys.modules))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    return {line.split(".")[0] for line in out.stdout.splitlines()}


def test_help_imports_no_heavy_module():
    loaded = _modules_after(
        "import sys\nfrom peagle_deploy.cli.app import main\nsys.argv=['peagle','--help']\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass"
    )
    assert not loaded & set(HEAVY), sorted(loaded & set(HEAVY))


def test_every_command_help_imports_no_heavy_module():
    from peagle_deploy.cli.app import app
    import typer.main

    group = typer.main.get_command(app)
    for name in group.commands:
        loaded = _modules_after(
            f"from peagle_deploy.cli.app import main\ntry:\n    main([{name!r}, '--help'])\nexcept SystemExit:\n    pass"
        )
        assert not loaded & set(HEAVY), (name, sorted(loaded & set(HEAVY)))
