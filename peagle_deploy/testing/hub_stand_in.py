"""A stand-in for the model hub on loopback: the few endpoints huggingface_hub calls to stage a drafter.

    with HubStandIn({"z-lab/Qwen3-Coder-30B-A3B-DFlash": dflash_repo("Qwen/Qwen3-Coder-30B-A3B-Instruct")}) as hub:
        os.environ["HF_ENDPOINT"] = hub.url       # huggingface_hub now asks it, not the real hub

Endpoints (the shapes huggingface_hub 0.26-2.x reads, huggingface_hub/hf_api.py and file_download.py):
- `GET /api/models/OWNER/NAME/revision/REV[?blobs=True]`: the commit (`sha`), `siblings` (`rfilename`, `size`,
  `blobId`, `lfs.sha256` for large files), `cardData` (license, base_model), `gated`;
- `HEAD` / `GET /OWNER/NAME/resolve/REV/PATH`: the file, with `X-Repo-Commit`, `ETag` (the LFS sha256 or the git blob
  id) and `Content-Length`.
Errors carry the hub's `X-Error-Code` (RepoNotFound, RevisionNotFound, EntryNotFound, GatedRepo), which
huggingface_hub turns into its own exceptions. A gated repository answers only a request with its token.
Faults: `corrupt` (path -> bytes served instead of the listed ones, so the listed checksum no longer matches).
"""

from __future__ import annotations

import hashlib
import json
import struct
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote, urlparse

from .server_threads import ClosingThreadingMixIn

LFS_SUFFIXES = (".safetensors", ".bin", ".pt")


@dataclass
class HubRepo:
    files: dict[str, bytes]
    commit: str = "0123456789abcdef0123456789abcdef01234567"
    revisions: tuple[str, ...] = ("main",)
    card: dict[str, Any] = field(default_factory=dict)
    gated: bool = False
    token: str | None = None  # the token a gated repository accepts


def git_blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()  # noqa: S324 - git's object id


def safetensors_bytes(tensors: dict[str, tuple[list[int], bytes]]) -> bytes:
    """A safetensors file of F32 tensors: name -> (shape, raw little-endian bytes)."""
    header: dict[str, Any] = {}
    offset, blobs = 0, []
    for name, (shape, raw) in tensors.items():
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
        blobs.append(raw)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(blobs)


def dflash_repo(target_repo: str, *, block_size: int = 16, mask_token_id: int = 151669, gated: bool = False,
                token: str | None = None, card_license: str = "mit", name_target: str = "card",
                extra_config: dict[str, Any] | None = None) -> HubRepo:
    """A small repository shaped like a public DFlash drafter's: config.json (DFlashDraftModel, dflash_config with
    the mask token id and target layers, block_size), weights, model card. `name_target`: where it names its target
    ('card': the model card's base_model, 'config': config.json target_model, 'none')."""
    config: dict[str, Any] = {
        "architectures": ["DFlashDraftModel"], "model_type": "qwen3", "block_size": block_size,
        "dflash_config": {"mask_token_id": mask_token_id, "target_layer_ids": [1, 12, 23, 34, 45]},
        "hidden_size": 64, "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 1,
        "head_dim": 32, "intermediate_size": 128, "vocab_size": 32, "rms_norm_eps": 1e-6,
        **(extra_config or {}),
    }
    if name_target == "config":
        config["target_model"] = target_repo
    weights = safetensors_bytes({"layers.0.mlp.down_proj.weight": ([2, 2], struct.pack("<4f", 0, 0, 0, 0)),
                                 "fc.weight": ([2, 2], struct.pack("<4f", 1, 0, 0, 1))})
    card = {"license": card_license, **({"base_model": target_repo} if name_target == "card" else {})}
    readme = "---\n" + "".join(f"{k}: {v}\n" for k, v in card.items()) + "---\n# DFlash drafter (stand-in)\n"
    return HubRepo(files={"config.json": json.dumps(config, indent=2).encode(), "model.safetensors": weights,
                          "README.md": readme.encode(), ".gitattributes": b"*.safetensors filter=lfs\n"},
                   card=card, gated=gated, token=token)


class _Server(ClosingThreadingMixIn, ThreadingHTTPServer):
    daemon_threads = True


class HubStandIn:
    def __init__(self, repos: dict[str, HubRepo], *, corrupt: dict[str, bytes] | None = None):
        self.repos = repos
        self.corrupt = corrupt or {}
        self.requests: list[tuple[str, str, str | None]] = []  # (method, path, Authorization)
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        assert self._server is not None, "start the stand-in first"
        return f"http://127.0.0.1:{self._server.server_port}"

    def info(self, name: str, repo: HubRepo, blobs: bool) -> dict[str, Any]:
        siblings = []
        for path, data in sorted(repo.files.items()):
            sibling: dict[str, Any] = {"rfilename": path}
            if blobs:
                sibling.update(size=len(data), blobId=git_blob_id(data))
                if path.endswith(LFS_SUFFIXES):
                    sibling["lfs"] = {"size": len(data), "sha256": hashlib.sha256(data).hexdigest(), "pointerSize": 134}
            siblings.append(sibling)
        return {"_id": name, "id": name, "modelId": name, "sha": repo.commit, "private": False,
                "gated": "manual" if repo.gated else False, "disabled": False, "downloads": 0, "likes": 0,
                "tags": [], "cardData": repo.card, "siblings": siblings, "lastModified": "2026-11-30T00:00:00.000Z"}

    def __enter__(self) -> HubStandIn:
        hub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _reply(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None,
                       send_body: bool = True) -> None:
                self.send_response(status)
                for key, value in (headers or {}).items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if send_body:
                    self.wfile.write(body)

            def _error(self, status: int, code: str, send_body: bool = True) -> None:
                self._reply(status, json.dumps({"error": code}).encode(),
                            {"X-Error-Code": code, "Content-Type": "application/json"}, send_body)

            def _repo(self, name: str, revision: str, send_body: bool) -> HubRepo | None:
                repo = hub.repos.get(name)
                if repo is None:
                    self._error(404, "RepoNotFound", send_body)
                    return None
                if repo.gated and self.headers.get("Authorization") != f"Bearer {repo.token}":
                    self._error(401, "GatedRepo", send_body)
                    return None
                if revision not in (*repo.revisions, repo.commit):
                    self._error(404, "RevisionNotFound", send_body)
                    return None
                return repo

            def _handle(self, send_body: bool) -> None:
                url = urlparse(self.path)
                parts = [unquote(p) for p in url.path.split("/") if p]
                hub.requests.append((self.command, url.path, self.headers.get("Authorization")))
                if len(parts) == 6 and parts[:2] == ["api", "models"] and parts[4] == "revision":
                    name = f"{parts[2]}/{parts[3]}"
                    repo = self._repo(name, parts[5], send_body)
                    if repo is not None:
                        body = json.dumps(hub.info(name, repo, "blobs" in url.query.lower())).encode()
                        self._reply(200, body, {"Content-Type": "application/json"}, send_body)
                    return
                if len(parts) >= 5 and parts[2] == "resolve":
                    name, path = f"{parts[0]}/{parts[1]}", "/".join(parts[4:])
                    repo = self._repo(name, parts[3], send_body)
                    if repo is None:
                        return
                    if path not in repo.files:
                        self._error(404, "EntryNotFound", send_body)
                        return
                    listed = repo.files[path]
                    etag = hashlib.sha256(listed).hexdigest() if path.endswith(LFS_SUFFIXES) else git_blob_id(listed)
                    data = hub.corrupt.get(path, listed)
                    self._reply(200, data, {"X-Repo-Commit": repo.commit, "ETag": f'"{etag}"',
                                            "Content-Type": "application/octet-stream"}, send_body)
                    return
                self._error(404, "EntryNotFound", send_body)

            def do_GET(self) -> None:
                self._handle(True)

            def do_HEAD(self) -> None:
                self._handle(False)

        self._server = _Server(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(10)
