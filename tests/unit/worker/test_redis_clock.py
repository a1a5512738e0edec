"""The worker's estimate of Redis's clock: the heartbeat reading answered fastest wins."""

from __future__ import annotations

from taskqueue.worker.store import CLOCK_SAMPLES, RedisClock


def test_a_slow_reading_does_not_move_the_estimate() -> None:
    clock = RedisClock()
    clock.observe(redis_ms=1_000_000, sent=999.9995, received=1000.0005)  # 1 ms round trip
    assert clock.offset_ms == 0
    # answered 200 ms after asked, Redis having read its TIME at once: midpoint 100 ms late
    clock.observe(redis_ms=2_000_000, sent=2000.0, received=2000.2)
    assert clock.offset_ms == 0


def test_the_fastest_of_the_last_readings_sets_the_offset() -> None:
    clock = RedisClock()
    clock.observe(redis_ms=1_000_050, sent=999.99, received=1000.01)  # 20 ms, +50 ms offset
    clock.observe(redis_ms=1_001_030, sent=1000.9995, received=1001.0005)  # 1 ms, +30 ms
    assert clock.offset_ms == 30


def test_an_old_fast_reading_is_forgotten() -> None:
    """A host clock stepped since: the old reading leaves the window after CLOCK_SAMPLES more."""
    clock = RedisClock()
    clock.observe(redis_ms=1_000_000, sent=999.9995, received=1000.0005)
    for i in range(CLOCK_SAMPLES):
        t = 2000.0 + i
        clock.observe(redis_ms=int(t * 1000) + 500, sent=t - 0.005, received=t + 0.005)
    assert clock.offset_ms == 500
