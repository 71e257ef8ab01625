"""Test servers whose request threads end with them: closing the server shuts its open connections down and
joins their threads.

socketserver's ThreadingMixIn joins its request threads on `server_close()`, but a thread serving a keep-alive
connection (werkzeug speaks HTTP/1.1) waits in a read until the client hangs up. A client that never does (a
connection pool a test left open) blocked that join for good: the server's thread outlived its fixture, and the
request thread woke at interpreter shutdown, when the client's socket was finally closed, to find module globals
gone (a NameError in a thread). Here the server shuts each open connection down first, so each read ends, then
joins the threads, for at most JOIN_S in all.

`shutdown()` returns within POLL_S: socketserver's serve_forever looks for it between waits of `poll_interval`
(0.5 s by default), so every test server's stop cost half a second of nothing (a fresh emulator per test: 0.5 s
of each such test).
"""

from __future__ import annotations

import socket
import socketserver
import threading
import time
from typing import Any

JOIN_S = 10.0  # a request thread still busy after this (a stalled reply) is left to its daemon flag
POLL_S = 0.02  # how often serve_forever looks for a shutdown (an idle server: 50 wake-ups a second, ~0.1% of a core)
_LOCK = threading.Lock()


class ClosingThreadingMixIn(socketserver.ThreadingMixIn):
    """ThreadingMixIn whose `server_close()` ends the requests still open and joins their threads."""

    daemon_threads = True  # one still running past JOIN_S never holds the interpreter open
    block_on_close = False  # the join is server_close's own, below, with a bound

    def serve_forever(self, poll_interval: float = POLL_S) -> None:
        super().serve_forever(poll_interval)  # type: ignore[misc]

    def process_request(self, request: Any, client_address: Any) -> None:
        thread = threading.Thread(target=self.process_request_thread, args=(request, client_address),
                                  name=f"{type(self).__name__} request", daemon=True)
        with _LOCK:
            requests = vars(self).setdefault("_open_requests", {})
            for done in [t for t in requests if not t.is_alive()]:
                del requests[done]
            requests[thread] = request
            thread.start()

    def server_close(self) -> None:
        super().server_close()
        with _LOCK:
            requests = list(vars(self).pop("_open_requests", {}).items())
        for _thread, request in requests:
            try:
                request.shutdown(socket.SHUT_RDWR)  # a read waiting for the next request returns: no more
            except OSError:
                pass  # already closed by its thread
        deadline = time.monotonic() + JOIN_S
        for thread, _request in requests:
            thread.join(max(0.0, deadline - time.monotonic()))
