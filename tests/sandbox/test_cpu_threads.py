"""Candidate and baselines are timed with the same, configured thread count (real processes).

Before ``cpu_threads`` the candidate ran with ``min(8, cpu_count)`` OpenMP
threads and the reference (baselines) with torch's default (all physical
cores): on a shared CI machine every parallel region of the baselines waited
for preempted team threads, and CPU speedups vs torch.compile came out at
85-1000x. Both processes must report ``settings.cpu_threads``, whatever the
parent's environment says, and baselines measured with another count must
not be reused from the cache.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda_agent.harness.baselines import baseline_key
from cuda_agent.harness.reference import ReferenceProcess
from cuda_agent.harness.sandbox import CandidatePool
from cuda_agent.harness.settings import HarnessSettings

TASK = """import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x * 2.0


def get_inputs():
    return [torch.randn(4, 8)]


def get_init_inputs():
    return []
"""


@pytest.mark.slow
@pytest.mark.parametrize("parent_env", [None, "3"])
def test_candidate_and_reference_use_the_configured_thread_count(
    parent_env: str | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if parent_env is None:
        monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    else:
        monkeypatch.setenv("OMP_NUM_THREADS", parent_env)
    settings = HarnessSettings(pool_size=0, scratch_dir=tmp_path)
    assert settings.cpu_threads == 1
    pool = CandidatePool("cpu", settings)
    proc = pool.acquire()
    try:
        candidate_threads = proc.wait_ready()["threads"]
    finally:
        pool.release(proc)
        pool.close()
    ref = ReferenceProcess(TASK, "cpu", threads=settings.cpu_threads)
    try:
        reference_threads = ref.call("threads")
    finally:
        ref.close()
    assert candidate_threads == reference_threads == settings.cpu_threads


def test_thread_count_is_part_of_the_baseline_key() -> None:
    args = ("hash", "x86_64", "2.13.0", "compile", "ours", "default")
    assert baseline_key(*args, 1) != baseline_key(*args, 2)
    assert baseline_key(*args, 2) == baseline_key(*args, 2)
