"""Baseline timings (eager and torch.compile) on the same machine, cached.

Baselines are timed in the trusted reference process, a clean process where
no candidate code ever ran (T16), with the candidate's exact protocol
(:class:`~cuda_agent.harness.timing.DeviceTimer`) over the same rotated input
sets. The cache key is (task code hash, device name, torch version, timing
preset, compile mode, thread count, pre-roll spin), so a baseline is never borrowed from another machine
or another torch. Entries are small JSON files; outputs are never cached.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from cuda_agent.harness.settings import TimingSettings
from cuda_agent.harness.spin_policy import SPIN_RULE_VERSION
from cuda_agent.harness.timing_protocol import TimingProtocol
from cuda_agent.harness.timing_stats import TimingLock, summarize, timing_done
from cuda_agent.schemas.result import Baselines, Timing


def baseline_key(
    code_hash: str, device_name: str, torch_version: str, which: str, preset: str, compile_mode: str, threads: int = 1,
    preroll_us: float = 0.0, net_overhead: bool = False, timing_cpus: str = "any", flush_multiple: float = 2.0,
    warm_pages: bool = False, clone_inputs: bool = True, preroll_retakes: int = 0, preroll_max_us: float = 5000.0,
    spin_window: int = 0,
) -> str:
    """Stable id of one baseline measurement (``threads``: intra-op threads it ran with; ``preroll_us``: the timer's
    pre-call spin, which changes what a short call's events measure; ``net_overhead``: times net of the protocol's
    per-process cost; ``timing_cpus``: where the timing process ran; ``flush_multiple``: the L2 flush's size;
    ``warm_pages``: inputs' pages warmed after the flush; ``clone_inputs``: a clone per call; ``preroll_retakes`` /
    ``preroll_max_us``: retakes of calls whose host side outlasted the spin; ``spin_window``: the first take's spin
    follows the recent host enqueue; with a spin, the version of the rule for calls whose host waits for the device,
    :data:`~cuda_agent.harness.spin_policy.SPIN_RULE_VERSION`). The protocol's fields are in
    :class:`~cuda_agent.harness.timing_protocol.TimingProtocol`."""
    material: list[Any] = [code_hash, device_name, torch_version, which, preset, compile_mode if which == "compile" else "", threads]
    if preroll_us:
        material.append(float(preroll_us))
    if net_overhead:
        material.append("net")
    if timing_cpus != "any":  # keys of runs without pinning are unchanged
        material.append(f"cpus={timing_cpus}")
    if flush_multiple != 2.0:  # likewise for the flush's size
        material.append(f"flush={float(flush_multiple)}")
    if warm_pages:
        material.append("warm_pages")
    if not clone_inputs:
        material.append("direct_inputs")
    if preroll_retakes and preroll_us:  # without a spin there is nothing to retake
        material.append(f"retakes={int(preroll_retakes)}/{float(preroll_max_us)}")
    if spin_window and preroll_us:  # keys of runs without an adaptive spin are unchanged
        material.append(f"spin_window={int(spin_window)}")
    if preroll_us:  # a spin-blocked model is timed behind the base spin since this rule (harness/spin_policy.py)
        material.append(f"spin_rule={SPIN_RULE_VERSION}")
    blob = json.dumps(material)
    return f"{which}-" + hashlib.sha256(blob.encode()).hexdigest()[:20]


class BaselineCache:
    """A folder of ``<key>.json`` files, each one :class:`Timing` plus its key material."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.hits = 0
        self.misses = 0

    def get(self, key: str, count: bool = True) -> Timing | None:
        """The cached timing, or None (``count``: tally the hit or miss)."""
        path = self.root / f"{key}.json"
        try:
            data = json.loads(path.read_text())
            timing = Timing.model_validate(data["timing"])
        except (OSError, ValueError, KeyError):
            self.misses += count
            return None
        self.hits += count
        return timing

    @contextlib.contextmanager
    def computing(self, key: str) -> Iterator[None]:
        """Held while one baseline is measured: processes and threads sharing the folder measure each key once
        (the learning curve's seeds run side by side on the same held-out tasks, and each measured every
        torch.compile baseline itself). Check :meth:`get` again inside: another holder may have stored it."""
        locks = self.root / ".locks"
        locks.mkdir(parents=True, exist_ok=True)
        with open(locks / f"{key}.lock", "a") as fh:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh.fileno(), fcntl.LOCK_UN)

    def put(self, key: str, timing: Timing, meta: dict[str, Any]) -> None:
        """Store atomically (several evaluators may share the folder)."""
        self.root.mkdir(parents=True, exist_ok=True)
        tmp = self.root / f".{key}.{os.getpid()}-{threading.get_ident()}.tmp"  # two sessions of one task may race
        tmp.write_text(json.dumps({"timing": timing.model_dump(mode="json"), "meta": meta, "created": time.time()}))
        os.replace(tmp, self.root / f"{key}.json")


def key_for(which: str, *, code_hash: str, device_name: str, torch_version: str, protocol: TimingProtocol,
            compile_mode: str, threads: int, timing_cpus: str = "any") -> str:
    """:func:`baseline_key` of one baseline under ``protocol`` (the earlier keys' material, unchanged)."""
    timer = protocol.timer
    return baseline_key(
        code_hash, device_name, torch_version, which,
        "release_profiler_sum" if protocol.method == "profiler_sum" else "ours", compile_mode, threads,
        timer.preroll_us, protocol.net_overhead, timing_cpus, timer.l2_flush_multiple, timer.warm_input_pages,
        protocol.baseline_clone_inputs, timer.preroll_retakes, timer.preroll_max_us, timer.baseline_spin_window,
    )


def measure_baseline(ref: Any, which: str, sets: list[int], protocol: TimingProtocol, compile_mode: str,
                     lock: TimingLock, method: str, *, batch: int = 10) -> Timing:
    """Time the eager or compiled reference in the reference process until the median is precise."""
    samples: list[float] = []
    wall_ms = 0.0
    if which == "compile":  # torch.compile compiles on its first call: CPU work that must not hold the GPU's timing lock
        ref.prepare_baseline(which, sets[0], compile_mode)
    warmup = protocol.warmup_calls + (2 if which == "compile" else 0)
    start: float | None = None  # the budget starts after the first batch (torch.compile's first call is not timing)
    while not (samples and timing_done(samples, protocol, time.monotonic() - start if start is not None else 0.0)):
        with lock:
            t0 = time.perf_counter()
            got = ref.time_baseline(which, sets, batch, warmup if not samples else 1, compile_mode)
            wall_ms += (time.perf_counter() - t0) * 1e3
        samples += got
        if start is None:
            start = time.monotonic()
    return summarize(samples, method, wall_ms=wall_ms)


def cached_baselines(
    ref: Any,
    *,
    code_hash: str,
    device_name: str,
    torch_version: str,
    sets: list[int],
    protocol: TimingProtocol,
    timing: TimingSettings,
    threads: int,
    timing_cpus: str,
    lock: TimingLock,
    cache: BaselineCache,
    method: str,
) -> tuple[Baselines, bool]:
    """Eager (+ compile) baselines from the cache or measured now; returns (baselines, all_cached)."""
    out = Baselines(compile_mode=timing.compile_mode)
    all_cached = True
    kinds = ["eager"] + (["compile"] if timing.compile_baseline else [])
    for which in kinds:
        key = key_for(which, code_hash=code_hash, device_name=device_name, torch_version=torch_version,
                      protocol=protocol, compile_mode=timing.compile_mode, threads=threads, timing_cpus=timing_cpus)
        cached = cache.get(key)
        if cached is None:
            # The key's lock is taken before the device's timing lock and never while holding it, in either mode
            # (a device step holds the shared mode; another holder of the key may be waiting for the exclusive one
            # behind it): no cycle.
            with lock.outside(), cache.computing(key):
                cached = cache.get(key, count=False)
                if cached is None:
                    all_cached = False
                    if protocol.method == "profiler_sum":
                        cached = Timing(median_ms=ref.profiler_sum(which, sets[0], timing.compile_mode), samples=10,
                                        method="profiler_sum")
                    else:
                        cached = measure_baseline(ref, which, sets, protocol, timing.compile_mode, lock, method)
                    cache.put(key, cached, {"code_hash": code_hash, "device": device_name, "torch": torch_version,
                                            "which": which})
        setattr(out, which, cached)
        out.ids[which] = key
    return out, all_cached
