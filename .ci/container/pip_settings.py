"""This machine's pip settings for a container build: a pip.conf and the local paths it names, to mount read-only.

    python3 pip_settings.py OUT_PIP_CONF      # prints one `--volume=SRC:SRC:ro` per local path, then the conf's

What `pip config list` shows on the host (files and PIP_* variables, the variables winning as in pip) is written to
OUT_PIP_CONF as one [global] section. Every value that is an absolute path or a file:// URL that exists here (find-links
directories, local indexes with the directory above them, a constraints file, the CA bundle) is mounted at the same path, so the build's pip sees
exactly what this machine's pip sees. Nothing is written into the image: the build mounts these only while it runs.
"""

from __future__ import annotations

import configparser
import os
import re
import subprocess
import sys
from pathlib import Path

_LINE = re.compile(r"^(?P<scope>[^.]*)\.(?P<key>[\w-]+)='(?P<value>.*)'$")
# settings about the host's own pip, not about where packages come from
_SKIP = {"cache-dir", "no-cache-dir", "target", "prefix", "root", "user", "src", "log", "require-virtualenv"}


def host_settings() -> dict[str, str]:
    listed = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True,
                            check=True).stdout
    settings: dict[str, str] = {}
    environment: dict[str, str] = {}
    for line in listed.splitlines():
        match = _LINE.match(line.strip())
        if not match or match["key"] in _SKIP or match["scope"] not in ("global", "install", ":env:"):
            continue
        (environment if match["scope"] == ":env:" else settings)[match["key"]] = match["value"]
    return {**settings, **environment}


def local_paths(settings: dict[str, str]) -> list[str]:
    paths: set[str] = set()
    for key, value in settings.items():
        for word in value.split():
            path = word[len("file://"):] if word.startswith("file://") else word
            if not (path.startswith("/") and os.path.exists(path)):
                continue
            path = os.path.realpath(path) if os.path.islink(path) else path.rstrip("/")
            # a local index's pages link to files beside it (../../files/...): mount its parent
            paths.add(os.path.dirname(path) if key.endswith("index-url") else path)
    # a directory already mounted covers what lies under it
    return sorted(p for p in paths if not any(p != q and p.startswith(q.rstrip("/") + "/") for q in paths))


def main(out: str) -> None:
    settings = host_settings()
    conf = configparser.ConfigParser(interpolation=None)
    conf["global"] = settings
    with open(out, "w", encoding="utf-8") as handle:
        conf.write(handle)
    for path in local_paths(settings):
        print(f"--volume={path}:{path}:ro")
    print(f"--volume={Path(out).resolve()}:/etc/pip.conf:ro")


if __name__ == "__main__":
    main(sys.argv[1])
