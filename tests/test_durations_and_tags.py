"""The one duration grammar (--ttl, --since; peagle_deploy/inputs.py) and the one typed tag model (issue 12)."""

from datetime import UTC, datetime, timedelta

import pytest

from peagle_deploy.durations import format_duration, parse_duration
from peagle_deploy.errors import ExitCode, PeagleError
from peagle_deploy.tags import PeagleTags, is_managed


@pytest.mark.parametrize("text,seconds", [
    ("15m", 900), ("2h", 7200), ("1h30m", 5400), ("1d", 86400), ("1d12h", 129600), ("2w", 1209600),
    ("1h30m15s", 5415),
])
def test_durations_take_whole_lower_case_units_largest_first(text, seconds):
    assert parse_duration(text, flag="--ttl") == timedelta(seconds=seconds)


@pytest.mark.parametrize("text,line", [
    # what the grammar once read loosely (issue 49 item 9): refused, naming the one spelling
    ("1.5h", "--ttl '1.5h' is not in whole units: pass --ttl 1h30m"),
    (" 4H ", "--ttl ' 4H ' has spaces: pass --ttl 4h"),
    ("4H", "--ttl '4H' has upper-case units: pass --ttl 4h"),
    ("1h 30m", "--ttl '1h 30m' has spaces: pass --ttl 1h30m"),
    ("90 minutes", "--ttl '90 minutes' has spaces: pass --ttl 1h30m"),
    ("1hour", "--ttl '1hour' spells out its units: pass --ttl 1h"),
    ("\u0664h", "--ttl '\u0664h' is written with digits other than 0-9: pass --ttl 4h"),
    ("30 s", "--ttl '30 s' has spaces: pass e.g. 15m, 2h, 1h30m or 2d"),  # 30s is below --ttl's minimum
])
def test_loose_durations_are_refused_naming_the_spelling(text, line):
    with pytest.raises(PeagleError) as err:
        parse_duration(text, flag="--ttl")
    assert err.value.one_line() == line


@pytest.mark.parametrize("text,message", [
    ("90", "has no unit"), ("", "is empty"), ("soon", "is not a duration"), ("-5m", "is not a duration"),
    ("30m1h", "repeats or misorders"), ("1h1h", "repeats or misorders"), ("1h-30m", "is not a duration"),
    ("0s", "shorter than 1s"), ("5x", "unknown unit"), ("1h30", "is not a duration"),
])
def test_durations_refuse_with_one_line_naming_the_flag(text, message):
    with pytest.raises(PeagleError) as err:
        parse_duration(text, flag="--since")
    assert err.value.exit_code == ExitCode.USAGE
    assert message in str(err.value) and "\n" not in str(err.value)
    assert str(err.value).startswith("--since")


def test_duration_bounds_and_display():
    with pytest.raises(PeagleError, match="longer than 30d"):
        parse_duration("31d", flag="--ttl", maximum=timedelta(days=30))
    assert [format_duration(s) for s in (0, 45, 725, 11220, 86400, 180000, -5)] == [
        "0s", "45s", "12m05s", "3h07m", "1d", "2d02h", "0s"]


def test_ttl_and_since_share_the_grammar():
    from peagle_deploy.bench.window import parse_span

    assert parse_span("1h30m") == parse_duration("90m") == timedelta(minutes=90)
    assert parse_span("90s") == timedelta(seconds=90)


def test_tags_round_trip_and_true_is_true_in_any_case():
    now = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
    written = PeagleTags(managed=True, model="qwen3-coder", model_id="m", mode="p-eagle", k=7,
                         instance_type="ml.g7e.2xlarge", instance_count=2, created_at=now,
                         expires_at=now + timedelta(hours=4), version="0.1").to_aws()
    assert written["peagle:managed"] == "true" and written["peagle:k"] == "7"
    assert written["peagle:expires-at"] == "2026-11-22T16:00:00+00:00"
    read = PeagleTags.from_aws(written)
    assert (read.k, read.instance_count, read.expires_at, read.problems) == (7, 2, now + timedelta(hours=4), [])
    for value, managed in (("true", True), ("True", True), ("TRUE", True), (" true ", True), ("false", False),
                           ("yes", False), ("", False)):
        assert is_managed({"peagle:managed": value}) is managed
    assert is_managed([{"Key": "peagle:managed", "Value": "True"}])
    off = PeagleTags.from_aws(PeagleTags(managed=True, mode="off", k=None).to_aws())
    assert off.k is None and off.mode == "off"


@pytest.mark.parametrize("value,expired,problem", [
    ("2020-01-01T00:00:00+00:00", True, None),
    ("2020-01-01T00:00:00Z", True, None),
    ("2999-01-01T00:00:00+02:00", False, None),
    ("2020-01-01T00:00:00", None, "has no time zone"),
    ("next tuesday", None, "is not an ISO 8601 time"),
])
def test_expiry_is_parsed_strictly_and_never_silently_never(value, expired, problem):
    tags = PeagleTags.from_aws({"peagle:managed": "true", "peagle:expires-at": value})
    assert tags.expired(datetime.now(UTC)) is expired
    assert (problem is None and not tags.problems) or problem in tags.problems[0]
    assert PeagleTags.from_aws({"peagle:managed": "true"}).expired(datetime.now(UTC)) is False  # no tag: never


def test_unreadable_numbers_are_problems_not_crashes():
    tags = PeagleTags.from_aws({"peagle:k": "three", "peagle:instance-count": "-1"})
    assert tags.k is None and tags.instance_count is None and len(tags.problems) == 2
