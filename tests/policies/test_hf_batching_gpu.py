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
