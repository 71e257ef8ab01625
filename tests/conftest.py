"""Shared fixtures (keep each small; several helpers add here)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def emulator_server():
    """One SageMakerEmulator server for the tests that run the installed `peagle` executable
    (tests/test_bad_inputs_table.py, tests/test_docs_examples.py), with `emulator_server.recorder`
    (a WriteRecorder: the writes each process made, by its AWS_SDK_UA_APP_ID). It does not set this
    process's environment: pass `emulator_server.env` to subprocesses. moto's state is process-wide
    and in-process emulators reset it, so a user seeds what it needs when it starts."""
    from peagle_deploy.testing import SageMakerEmulator
    from peagle_deploy.testing.write_recorder import WriteRecorder

    recorder = WriteRecorder()
    with SageMakerEmulator.server(middlewares=[recorder.middleware], set_env=False) as emulator:
        emulator.recorder = recorder
        yield emulator
