"""The benchmark scripts' measuring code runs against the current APIs (docs/performance.md's figures
come from it)."""

import functools
import math

from conftest import load_script


def test_bench_prefetch_times_a_scene_built_with_the_prefetch_off_and_on():
    bench_prefetch = load_script("bench_prefetch")
    default = bench_prefetch.prefetch.MIN_BYTES
    off, on = bench_prefetch.compare(functools.partial(bench_prefetch.scene_round, "arm", 8, 2), rounds=2)
    assert len(off) == len(on) == 2
    assert all(math.isfinite(rate) and rate > 0 for rate in off + on)  # env-steps/s of each round
    assert bench_prefetch.prefetch.MIN_BYTES == default  # the threshold is restored
