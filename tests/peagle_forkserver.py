"""The installed `peagle`'s entry point without its start-up cost: one process imports
`peagle_deploy.cli.app` (and boto3) once, then runs each request in a forked child, as the executable
would run: its own process, environment, working directory, stdin/stdout/stderr, signal handlers and
exit code. Only Python's start-up and the imports are shared (they read no environment).

Protocol, one JSON object per line: in `{"argv", "env", "cwd", "stdin", "out", "err"}` (stdin: a file
or null for /dev/null; out/err: files to write, a FIFO too), out `{"code": <exit code>}`; with `"announce": true`
the child's `{"pid": <pid>}` comes first (to signal it). Used by tests/test_bad_inputs_table.py and the fault
matrix (tests/test_fault_matrix.py); a subset of their cases still runs through the executable itself.
"""

from __future__ import annotations

import json
import os
import sys
import traceback

import boto3  # noqa: F401 - most cases reach it: import once, here
import botocore.session  # noqa: F401

from peagle_deploy.cli.app import main


def run(request: dict) -> int:
    """In the forked child: become the executable's process, then run its entry point."""
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    for fd, path, flags in ((0, request["stdin"] or os.devnull, os.O_RDONLY),
                            (1, request["out"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
                            (2, request["err"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)):
        opened = os.open(path, flags, 0o600)
        os.dup2(opened, fd)
        os.close(opened)
    sys.stdin = sys.__stdin__ = open(0, encoding="utf-8", closefd=False)  # nothing read ahead by serve()
    sys.argv = ["peagle", *request["argv"]]
    try:
        code = main()  # the console script: sys.exit(main())
    except SystemExit as exc:
        code = exc.code
    except BaseException:  # noqa: BLE001 - what the interpreter would do with it
        traceback.print_exc()
        code = 1
    if code is None:
        code = 0
    elif not isinstance(code, int):
        print(code, file=sys.stderr)
        code = 1
    return code


def serve() -> None:
    for line in sys.stdin:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                code = run(request)
            finally:
                for stream in (sys.stdout, sys.stderr):
                    try:
                        stream.flush()
                    except Exception:  # noqa: BLE001 - a closed pipe: nothing more to say
                        pass
                os._exit(code)
        if request.get("announce"):
            sys.__stdout__.write(json.dumps({"pid": pid}) + "\n")
            sys.__stdout__.flush()
        _, status = os.waitpid(pid, 0)
        answer = {"code": os.waitstatus_to_exitcode(status)}
        sys.__stdout__.write(json.dumps(answer) + "\n")
        sys.__stdout__.flush()


if __name__ == "__main__":
    serve()
