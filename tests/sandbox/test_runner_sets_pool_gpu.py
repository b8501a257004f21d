"""The candidate runner's received sets live in a memory pool of their own (CUDA).

A fresh set is handed over inside a timed batch, just before its call. Were it allocated from the pool the
candidate's calls use, it could take the cached block the call's output was about to reuse, and the call would pay a
``cudaMalloc`` inside its timed window: an honest kernel slower on never-seen data, charged by the fresh-set rule
(KernelBench's conv problems on an H100, session 31).
"""

from __future__ import annotations

import contextlib

import pytest
import torch

from cuda_agent.harness.runner_io import RunnerData

gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")

N = 64 << 20  # 256 MiB of fp32


def _segments_after_a_hand_over(context: contextlib.AbstractContextManager) -> tuple[int, int]:
    """(reserved bytes after a set arrives, reserved bytes after the next call's output), with the set allocated in
    ``context``; the call's output block is cached beforehand, as after any earlier call."""
    torch.cuda.synchronize()
    out = torch.empty(N, device="cuda")  # the previous call's output, freed: its block is cached
    del out
    with context:
        received = torch.empty(N, device="cuda")  # the fresh set's copy in the runner
    after_set = torch.cuda.memory_reserved()
    out = torch.empty(N, device="cuda")  # the next call's output
    after_call = torch.cuda.memory_reserved()
    del out, received
    return after_set, after_call


@pytest.mark.gpu
@gpu
def test_a_set_handed_over_leaves_the_calls_cached_block_alone() -> None:
    data = RunnerData(torch, "cuda", None)
    after_set, after_call = _segments_after_a_hand_over(data.sets_pool())
    assert after_call == after_set  # the call reused its cached block: no allocation inside its timed window


@pytest.mark.gpu
@gpu
def test_without_the_pool_the_set_takes_the_block_and_the_call_allocates() -> None:
    torch.cuda.empty_cache()
    after_set, after_call = _segments_after_a_hand_over(contextlib.nullcontext())
    assert after_call >= after_set + N * 4  # what the runner did before session 31: a new segment in the call


def test_off_cuda_the_pool_is_no_context_at_all() -> None:
    assert isinstance(RunnerData(torch, "cpu", None).sets_pool(), contextlib.nullcontext)
