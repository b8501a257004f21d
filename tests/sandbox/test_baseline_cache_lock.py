"""Processes sharing a baseline cache measure each baseline once (``BaselineCache.computing``).

The learning curve's seeds run side by side as processes on the same held-out tasks; before this lock each one
measured every eager and torch.compile baseline itself (CPU-heavy inductor compiles, three times over).
"""

from __future__ import annotations

import multiprocessing as mp
import time
from pathlib import Path

from cuda_agent.harness.baselines import BaselineCache
from cuda_agent.schemas.result import Timing


def _measure_once(root: str, key: str, log: str, start: float) -> None:
    while time.time() < start:  # all processes reach the cache at about the same moment
        time.sleep(0.001)
    cache = BaselineCache(Path(root))
    if cache.get(key) is None:
        with cache.computing(key):
            if cache.get(key, count=False) is None:
                with open(log, "a") as fh:
                    fh.write("measured\n")
                time.sleep(0.5)  # a measurement in progress: the others must wait, not measure again
                cache.put(key, Timing(median_ms=1.0, samples=10, method="host_sync"), {"which": "eager"})


def test_concurrent_processes_measure_a_baseline_once(tmp_path: Path) -> None:
    ctx = mp.get_context("spawn")
    log = tmp_path / "measured.log"
    start = time.time() + 3.0
    procs = [ctx.Process(target=_measure_once, args=(str(tmp_path / "cache"), "eager-abc", str(log), start))
             for _ in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    assert log.read_text().splitlines() == ["measured"]
    assert BaselineCache(tmp_path / "cache").get("eager-abc").median_ms == 1.0


def test_a_held_lock_does_not_block_other_keys(tmp_path: Path) -> None:
    cache = BaselineCache(tmp_path)
    with cache.computing("eager-a"):
        t0 = time.monotonic()
        with cache.computing("eager-b"):
            pass
        assert time.monotonic() - t0 < 1.0
    assert cache.misses == 0 and cache.get("eager-a") is None and cache.misses == 1
