"""The contract tier's pytest hooks (loaded by tests/conftest.py): the `--max-cost` option, the `aws` marker's
gate, the cost estimate printed before anything starts, and the report of the session's cleanup.

- Without PEAGLE_AWS_TESTS=1 every `aws` test is skipped (and the default `-m` deselects them anyway).
- With it, once collection has chosen the tests, the estimate of the selected ones is printed (`--collect-only`
  prints it and lists one test per behaviour: the dry run, no credentials needed; PEAGLE_AWS_DRY_RUN=1 prints it
  and skips every test). A run without credentials, PEAGLE_AWS_ROLE_ARN or PEAGLE_AWS_IMAGE is skipped, naming
  what is missing; a run whose most possible cost is above the cap, or unknown, refuses to start (exit 4).
- The session's account (tests/contract/conftest.py, `aws_account`) sweeps the prefix at the end, whatever
  happened; the summary says what was removed, and the exact command for anything that could not be.
"""

from __future__ import annotations

import pytest

SETTINGS = pytest.StashKey()
REPORT = pytest.StashKey()
NOT_ENABLED = ("the contract tier runs against a real account only with PEAGLE_AWS_TESTS=1, credentials, "
               "PEAGLE_AWS_ROLE_ARN and PEAGLE_AWS_IMAGE (docs/ci.md, 'The contract tier')")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.getgroup("peagle contract tier (pytest -m aws)").addoption(
        "--max-cost", type=float, default=None, metavar="USD",
        help="the contract tier refuses to start when it may cost more than USD (default: PEAGLE_AWS_MAX_COST, "
             "else 5)")


def _behaviour(item: pytest.Item):
    callspec = getattr(item, "callspec", None)
    return callspec.params.get("behaviour") if callspec is not None else None


@pytest.hookimpl(trylast=True)  # after -m and -k have deselected: only the tests that will run are priced
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    aws = [item for item in items if item.get_closest_marker("aws")]
    if not aws:
        return
    from .account import AwsSettings

    try:
        settings = AwsSettings.from_env(max_cost=config.getoption("--max-cost"))
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None
    if not settings.enabled:
        for item in aws:
            item.add_marker(pytest.mark.skip(reason=NOT_ENABLED))
        return
    config.stash[SETTINGS] = settings
    from .costs import estimate, refusal, render

    found = estimate([b for b in map(_behaviour, aws) if b is not None], instance_type=settings.instance_type,
                     region=settings.region)
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    for line in render(found, prefix=settings.prefix, max_cost=settings.max_cost):
        if reporter is not None:
            reporter.write_line(line)
    if config.option.collectonly:
        return
    if settings.dry_run:
        for item in aws:
            item.add_marker(pytest.mark.skip(reason="PEAGLE_AWS_DRY_RUN=1: the estimate above; nothing started"))
        return
    missing = settings.missing()
    from peagle_deploy.aws import AwsSession

    if not AwsSession(settings.region).has_credentials():
        missing.append("AWS credentials (botocore's chain found none)")
    if missing:
        for item in aws:
            item.add_marker(pytest.mark.skip(reason=f"the contract tier needs {', '.join(missing)} (docs/ci.md)"))
        return
    why = refusal(found, settings.max_cost)
    if why is not None:
        raise pytest.UsageError(why)


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    report = config.stash.get(REPORT, None)
    if report is None:
        return
    terminalreporter.section("peagle contract tier: cleanup")
    for line in report:
        terminalreporter.write_line(line)
