"""A level's figures folded request by request (bench.aggregate) equal the ones computed, as before issue 26,
from every request's record kept to the end: same recorded runs, both aggregations, every field."""

from __future__ import annotations

import asyncio
import random
import statistics
import time
from array import array
from types import SimpleNamespace

import pytest

from peagle_deploy.bench.aggregate import LevelAggregate
from peagle_deploy.bench.loadgen import run_level
from peagle_deploy.bench.records import RequestRecord
from peagle_deploy.bench.stats import LatencyHistogram, LatencySamples, summarize, time_weighted_mean

PROMPTS = [[{"role": "user", "content": f"p{i}"}] for i in range(3)]


def reference_measure(records, changes, concurrency, t0, t1, warmup):
    """The aggregation of main before issue 26 (bench/loadgen.py `measure`), kept verbatim as the oracle:
    it reads every request's record after the level has ended."""
    window = max(t1 - t0, 1e-9)
    usage_tokens = usage_chunks = 0
    for r in records:
        if r.error is None and r.usage_tokens is not None and r.chunks:
            usage_tokens += r.usage_tokens
            usage_chunks += r.chunks
    tokens_per_chunk = usage_tokens / usage_chunks if usage_chunks else None
    tokens = 0.0
    ttft, ttfc, tpot, e2e = [], [], [], []
    itl = LatencyHistogram()
    completed = cut = in_window = 0
    error_kinds: dict[str, int] = {}
    error_examples: dict[str, str] = {}
    for r in records:
        if not r.cut and r.error is None and not r.warmup and r.gaps is not None:  # as run_level's `finally`
            itl.add_gaps(r.gaps, r.chunks - 1 - len(r.gaps))
        if r.error is not None:
            if not r.warmup:
                error_kinds[r.error] = error_kinds.get(r.error, 0) + 1
                error_examples.setdefault(r.error, r.error_text or r.error)
            continue
        inside = max(0, (r.at_close if r.at_close >= 0 else r.chunks) - max(r.at_open, 0))
        if inside:
            per_chunk = r.usage_tokens / r.chunks if r.usage_tokens is not None and r.chunks else \
                (tokens_per_chunk or 1.0)
            tokens += inside * per_chunk
        if r.warmup:
            continue
        if r.cut:
            cut += 1
            continue
        if r.end > t1 or not r.chunks or r.first is None:
            continue
        completed += 1
        in_window += r.end >= t0
        ttft.append(r.first - r.start)
        if r.first_content is not None:
            ttfc.append(r.first_content - r.start)
        e2e.append(r.end - r.start)
        n_tokens = r.usage_tokens if r.usage_tokens is not None else r.chunks
        if n_tokens > 1:
            tpot.append((r.end - r.first) / (n_tokens - 1))
    mean_in_flight = time_weighted_mean(changes, t0, t1)
    return dict(
        concurrency=concurrency, window_s=window, completed=completed, cut_at_end=cut,
        warmup_requests=min(warmup, len(records)), errors=sum(error_kinds.values()), error_kinds=error_kinds,
        error_examples=error_examples, output_tokens=round(tokens), output_tokens_per_s=tokens / window,
        requests_per_s=in_window / window, mean_in_flight=mean_in_flight,
        concurrency_held=mean_in_flight / concurrency, tokens_per_chunk=tokens_per_chunk,
        ttft_ms=summarize(ttft, 1000), ttfc_ms=summarize(ttfc, 1000), itl_ms=itl.summary(),
        tpot_ms=summarize(tpot, 1000), e2e_ms=summarize(e2e, 1000))


def snapshot(rec: RequestRecord):
    copy = SimpleNamespace(**{name: getattr(rec, name) for name in RequestRecord.__slots__})
    copy.gaps = None if rec.gaps is None else array("f", rec.gaps)
    return copy


def in_flight_changes(records):
    """The (time, requests in flight) steps the old run_level kept, rebuilt from the records."""
    events = sorted([(r.start, 1) for r in records] + [(r.end, -1) for r in records])
    level, changes = 0, []
    for t, step in events:
        level += step
        changes.append((t, level))
    return changes


def varied_sender(seed: int, *, slow: bool = False):
    """Answers of random length, with or without usage, reasoning first sometimes, several tokens per chunk
    sometimes, and failures of a few kinds; `slow` makes some answers outlast a short duration."""
    rng = random.Random(seed)

    async def send(messages, rec: RequestRecord) -> None:
        n = rng.randint(0, 6) if not slow else rng.choice([1, 2, 3, 200])
        per_chunk = rng.choice([1, 1, 3])
        usage = rng.random() < 0.7
        reasoning = rng.random() < 0.2
        fail = rng.random()
        for i in range(n):
            await asyncio.sleep(rng.choice([0, 0, 0.0005, 0.001]))
            rec.add(1, time.perf_counter(), not (reasoning and i == 0))
        if fail < 0.08:
            raise ConnectionResetError("reset by peer")
        if fail < 0.12:
            err = RuntimeError("the server said no")
            err.status = rng.choice([429, 500])
            raise err
        if usage:
            rec.usage_tokens = n * per_chunk

    return send


def run_recorded(send, concurrency, **kwargs):
    records = []
    m = asyncio.run(run_level(send, PROMPTS, concurrency, on_request=lambda r: records.append(snapshot(r)),
                              **kwargs))
    return m, records


def assert_same(m, expected):
    for name, want in expected.items():
        got = getattr(m, name)
        if hasattr(want, "model_dump"):
            got, want = got.model_dump(), want.model_dump()
            for key in want:
                assert got[key] == pytest.approx(want[key], rel=1e-9, abs=1e-9), (name, key)
        elif isinstance(want, float):
            assert got == pytest.approx(want, rel=1e-9, abs=1e-12), name
        else:
            assert got == want, name


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_folding_equals_the_old_aggregation_with_a_number_of_prompts(seed):
    m, records = run_recorded(varied_sender(seed), 5, warmup=4, num_prompts=150)
    assert len(records) == 154 and m.errors > 0 and m.completed > 0  # the run is varied enough to compare
    expected = reference_measure(records, in_flight_changes(records), 5, m.window_open, m.window_close, 4)
    assert_same(m, expected)


@pytest.mark.parametrize("seed", [4, 5])
def test_folding_equals_the_old_aggregation_with_a_duration_and_cut_requests(seed):
    m, records = run_recorded(varied_sender(seed, slow=True), 6, warmup=3, duration=0.15)
    assert any(r.cut for r in records)
    expected = reference_measure(records, in_flight_changes(records), 6, m.window_open, m.window_close, 3)
    assert_same(m, expected)


def test_the_window_counts_only_chunks_inside_it():
    """Two hand-made requests in a window [1.0, 3.0] (was: test_measure_counts_only_chunks_inside_the_window)."""
    agg = LevelAggregate(2, 0, planned_close=2.0)
    agg.open(1.0)
    itl = agg.itl
    # chunks received when the window opened / closed: (1, 3) and (0, 2); the second ends after the window
    for i, (start, times, at_open, at_close) in enumerate([(0.0, [0.5, 1.5, 2.5], 1, 3),
                                                           (1.0, [1.2, 1.4, 3.5], 0, 2)]):
        r = RequestRecord(index=i, warmup=False, start=start, end=times[-1] + 0.1)
        for t in times:
            r.add(1, t)
        r.at_open, r.at_close = at_open, at_close
        if i == 0:  # (run_level records every finished request's gaps; here only the first's, to read them back)
            itl.add_gaps(r.gaps, r.chunks - 1 - len(r.gaps))
        agg.started += 1
        agg.fold(r)
    m = agg.measurement(3.0, 0.0, 0.0)
    assert m.output_tokens == 4  # 1.5, 2.5, 1.2, 1.4
    assert m.output_tokens_per_s == pytest.approx(2.0)
    assert m.completed == 1  # the second request ends at 3.6, after the window
    assert m.ttft_ms.mean == pytest.approx(500) and m.itl_ms.mean == pytest.approx(1000, rel=1e-9)  # exact
    assert m.mean_in_flight == pytest.approx((1.6 * 2 + 0.4 * 1) / 2)


def test_the_inter_chunk_mean_is_exact_and_the_percentiles_within_the_histograms_precision():
    """Gaps of 1.2346 and 2.3456 ms and two zeros: the histogram keeps whole microseconds (1,235 and 2,346, in
    2 us buckets above 2,048), the mean comes from the exact sum (0.89505 ms); percentiles stay within 0.1% + 1 us."""
    itl = LatencyHistogram()
    itl.add_gaps([0.0012346, 0.0023456], zeros=2)
    got = itl.summary()
    assert got.count == 4 and got.mean == pytest.approx((1.2346 + 2.3456) / 4, rel=1e-12)
    assert got.max == pytest.approx(2.3456, abs=0.001 + 2.3456e-3) and got.min == 0


def test_a_request_ending_after_the_planned_close_counts_when_the_window_ends_at_the_last_request():
    agg = LevelAggregate(1, 0, planned_close=1.0)
    agg.open(0.0)
    r = RequestRecord(index=0, warmup=False, start=0.5, end=1.2)
    r.add(2, 0.7)
    agg.started += 1
    agg.fold(r)
    assert agg.measurement(1.0, 0, 0).completed == 0  # the planned close: it ended after the window
    agg = LevelAggregate(1, 0, planned_close=1.0)
    agg.open(0.0)
    agg.started += 1
    agg.fold(r)
    assert agg.measurement(1.2, 0, 0).completed == 1  # the window ended at the last request


def test_latency_samples_are_exact_below_the_bound_and_within_hdr_precision_past_it():
    rng = random.Random(7)
    values = [rng.lognormvariate(-4, 1) for _ in range(5000)]
    exact = LatencySamples(exact_limit=10_000)
    spilled = LatencySamples(exact_limit=100)
    for v in values:
        exact.add(v)
        spilled.add(v)
    want = summarize(values, 1000)
    assert exact.summary(1000) == want
    got = spilled.summary(1000)
    assert got.count == want.count and got.min == want.min and got.max == want.max
    assert got.mean == pytest.approx(want.mean, rel=1e-12)
    ranked = sorted(v * 1000 for v in values)
    for p in (50, 90, 95, 99):  # HDR: a sample value at the percentile's rank, to 3 significant digits
        k = (len(ranked) - 1) * p / 100
        lo, hi = ranked[int(k)], ranked[min(int(k) + 1, len(ranked) - 1)]
        assert lo * (1 - 1e-3) <= getattr(got, f"p{p}") <= hi * (1 + 1e-3), p
    assert statistics.median(values) * 1000 == pytest.approx(got.p50, rel=2e-3)


def test_memory_does_not_grow_with_requests(monkeypatch):
    """Past the bound of exact latency samples (lowered here to 500), what a level keeps after 20,000
    requests is what it kept after 4,000: nothing per request."""
    import tracemalloc

    from peagle_deploy.bench import stats

    monkeypatch.setattr(stats, "EXACT_SAMPLES", 500)

    async def instant(messages, rec):
        rec.add(1, time.perf_counter())
        rec.usage_tokens = 1

    def peak_after(n):
        tracemalloc.start()
        asyncio.run(run_level(instant, PROMPTS, 8, num_prompts=n))
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        return peak

    small, large = peak_after(4_000), peak_after(20_000)
    assert large < small + 100_000  # the old aggregation kept ~500 bytes per request: +8 MB here
