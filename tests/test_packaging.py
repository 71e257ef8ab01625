"""A user's `pip install peagle-deploy` gets the data files: templates/ is packaged inside the wheel."""

import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_wheel_carries_every_template(tmp_path):
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path), str(ROOT)],
                   check=True, capture_output=True, timeout=300)
    [wheel] = tmp_path.glob("peagle_deploy-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = {f"peagle_deploy/_templates/{p.relative_to(ROOT / 'templates').as_posix()}"
                for p in (ROOT / "templates").rglob("*") if p.is_file() and "__pycache__" not in p.parts}
    assert expected, "templates/ is empty"
    assert expected <= names, sorted(expected - names)[:10]
    assert not any(n.startswith("tests/") for n in names)
