"""The hf engine on a CUDA device: sampling with log-probs that the trainer's recomputation reproduces."""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda_agent.protocols import SamplingParams

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("dtype,tol", [("float32", 1e-4), ("bfloat16", 0.1)])
def test_cuda_engine_logprobs_match_recomputation(tiny_lm_dir: Path, dtype: str, tol: float) -> None:
    import torch

    from cuda_agent.training.logprobs import token_logprobs
    from cuda_agent.training.rollout.hf_engine import HFRolloutEngine

    engine = HFRolloutEngine(tiny_lm_dir, device="cuda", dtype=dtype, batch_size=4)
    prompts = [[5, 6, 7, 8, 9], [10, 11], [12, 13, 14]]
    gens = engine.generate(prompts, SamplingParams(max_new_tokens=16, seed=0))
    for p, g in zip(prompts, gens):
        ids = torch.tensor([p + g.output_ids], device="cuda")
        with torch.no_grad():
            lp = token_logprobs(engine.model, ids)[0, len(p) - 1:].cpu()
        assert torch.allclose(lp, torch.tensor(g.logprobs), atol=tol), (dtype, lp, g.logprobs)


def test_cuda_hf_policy_multi_turn_prefix(tiny_lm_dir: Path) -> None:
    from cuda_agent.plugins.policies.hf import HFPolicyConfig, build_hf_policy
    from cuda_agent.schemas.messages import Message

    policy = build_hf_policy(HFPolicyConfig(model=str(tiny_lm_dir), device="cuda", max_new_tokens=16))
    messages = [Message(role="system", content="s"), Message(role="user", content="u")]
    contexts = []
    for k in range(3):
        out = policy.query(list(messages), [])
        contexts.append(policy.context_ids)
        messages += [Message(role="assistant", content=out.text), Message(role="user", content=f"obs {k}")]
    assert all(b[: len(a)] == a for a, b in zip(contexts, contexts[1:]))
