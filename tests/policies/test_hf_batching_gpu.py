"""Batched generation across concurrent callers on a CUDA device: each row keeps what it sampled."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from cuda_agent.protocols import SamplingParams

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("dtype,tol", [("float32", 1e-4), ("bfloat16", 0.1)])
def test_cuda_batching_engine_rows_match_recomputation(tiny_lm_dir: Path, dtype: str, tol: float) -> None:
    import torch

    from cuda_agent.training.logprobs import token_logprobs
    from cuda_agent.training.rollout.batching import BatchingEngine
    from cuda_agent.training.rollout.hf_engine import HFRolloutEngine

    engine = HFRolloutEngine(tiny_lm_dir, device="cuda", dtype=dtype, batch_size=16)
    prompts = [[5 + i, 6, 7, 8][: 1 + i % 4] + [9] * (i % 5) for i in range(12)]
    batching = BatchingEngine(engine, gather_s=600, expected=lambda: len(prompts))
    results: dict[int, object] = {}

    def call(i: int) -> None:
        results[i] = batching.generate([prompts[i]], SamplingParams(max_new_tokens=4 + 3 * (i % 4), seed=i))[0]

    threads = [threading.Thread(target=call, args=(i,)) for i in range(len(prompts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    batching.close()
    assert batching.stats.batches == 1 and batching.stats.max_rows == len(prompts)
    for i, p in enumerate(prompts):
        g = results[i]
        ids = torch.tensor([p + g.output_ids], device="cuda")
        with torch.no_grad():
            lp = token_logprobs(engine.model, ids)[0, len(p) - 1:].float().cpu()
        assert torch.allclose(lp, torch.tensor(g.logprobs), atol=tol), (i, dtype, lp, g.logprobs)


@pytest.mark.parametrize("dtype,tol", [("float32", 1e-4), ("bfloat16", 0.1)])
def test_cuda_continuous_batching_rows_match_recomputation_and_memory_stays_flat(tiny_lm_dir: Path, dtype: str,
                                                                                 tol: float) -> None:
    """Continuous batching on CUDA: rows joining at different steps keep the log-probs the trainer recomputes, and
    a long run's device memory does not grow with the steps taken (session 27's first version held every step's
    autograd graph and reached 126 GiB in the generation child within a minute)."""
    import torch

    from cuda_agent.training.logprobs import token_logprobs
    from cuda_agent.training.rollout.continuous import ContinuousDecoder
    from cuda_agent.training.rollout.hf_engine import HFRolloutEngine

    engine = HFRolloutEngine(tiny_lm_dir, device="cuda", dtype=dtype, batch_size=16)
    engine.eos_ids = set()  # every row runs to its limit
    dec = ContinuousDecoder(engine, max_rows=16, seed=0)
    prompts = [[5 + i, 6, 7, 8][: 1 + i % 4] + [9] * (i % 5) for i in range(12)]
    got: dict[int, object] = {}
    for i, p in enumerate(prompts):  # one row joins every third step
        got.update(dec.admit([(i, p, SamplingParams(max_new_tokens=6 + 5 * (i % 4)))]))
        for _ in range(3):
            got.update(dec.step())
    while dec.live:
        got.update(dec.step())
    for i, p in enumerate(prompts):
        g = got[i]
        assert len(g.output_ids) == 6 + 5 * (i % 4)
        ids = torch.tensor([p + g.output_ids], device="cuda")
        with torch.no_grad():
            lp = token_logprobs(engine.model, ids)[0, len(p) - 1:].float().cpu()
        assert torch.allclose(lp, torch.tensor(g.logprobs), atol=tol), (i, dtype, lp, g.logprobs)

    def peak_of(steps: int) -> int:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        dec.admit([(100 + k, [5, 6, 7], SamplingParams(max_new_tokens=steps + 1)) for k in range(8)])
        for _ in range(steps):
            dec.step()
        torch.cuda.synchronize()
        dec.abort()
        return torch.cuda.max_memory_allocated() - base

    short, long = peak_of(50), peak_of(1000)
    # a KV cache 20x longer costs at most its own size (a few MB here), not a graph per step
    assert long < short + 64 * 2**20, (short, long)
