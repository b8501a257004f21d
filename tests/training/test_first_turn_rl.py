"""``benchmarks/first_turn_rl.py``: its prompts, its offline reward (real parsing, the family writer, real nvcc) and
its sampler, on a tiny real model."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

from first_turn_rl import Scorer, carry_through_file, first_prompts, reset_optimizer, sample  # noqa: E402


def _reply(source: str) -> str:
    call = {"name": "write_file", "arguments": {"path": "kernels/chain.cu", "content": source}}
    return f"One kernel.\n<tool_call>{json.dumps(call)}</tool_call>"


def test_one_prompt_per_task_cut_at_its_first_policy_token() -> None:
    rows = [{"token_ids": [1, 2, 3, 4, 5], "loss_mask": [0, 0, 1, 1, 0], "meta": {"task_id": "a", "chain": ["relu"]}},
            {"token_ids": [1, 2, 9, 9], "loss_mask": [0, 0, 1, 1], "meta": {"task_id": "a", "chain": ["relu"]}},
            {"token_ids": [7, 8, 9, 6], "loss_mask": [0, 0, 0, 1], "meta": {"task_id": "b", "chain": ["sin", "cos"]}}]
    assert first_prompts(rows) == [([1, 2], ["relu"]), ([7, 8, 9], ["sin", "cos"])]


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc compiles the replies' kernels")
def test_the_reward_compiles_each_right_kernel_once_and_never_a_wrong_one() -> None:
    from cuda_agent.training.kernel_family.writer import Style, write_solution

    chain = ["erf", "cos", "cos"]
    clean = write_solution(chain, "cuda", Style()).files["kernels/chain.cu"]
    wrong_op = clean.replace("cosf(v)", "erff(v)", 1)
    slip = clean.replace("  return v;", "  return v)\\", 1)
    assert len({clean, wrong_op, slip}) == 3
    scorer = Scorer()
    texts = [_reply(clean), _reply(clean), _reply(wrong_op), _reply(slip), "no call"]
    rows = scorer.rows(texts, [chain] * 5, [True] * 5, [10] * 5)
    assert [r["first_turn_ok"] for r in rows] == [True, True, False, False, False]
    assert [r["compiles"] for r in rows] == [True, True, None, False, None]  # wrong operators: never compiled
    assert len(scorer.compiled) == 2  # the clean kernel once, the slip once
    assert [r["parsed"] for r in rows] == [True, True, True, True, False]


def test_sample_ends_each_reply_at_eos_and_gives_its_lowest_token_probability() -> None:
    from cuda_agent.training.engines.models import load_causal_lm

    tiny = {"model_type": "llama", "vocab_size": 16, "hidden_size": 32, "intermediate_size": 64,
            "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 2, "max_position_embeddings": 64}
    model = load_causal_lm(tiny, seed=0)
    torch.manual_seed(0)
    eos = 3
    rows = sample(model, [[5, 6, 7], [8, 9]], max_new=20, temperature=1.0, pad=0, eos_id=eos, batch=2)
    assert len(rows) == 2
    for r in rows:
        assert 1 <= len(r["ids"]) <= 20
        assert r["eos"] == (eos in r["ids"])
        if r["eos"]:
            assert r["ids"][-1] == eos and r["ids"].count(eos) == 1  # nothing after the end of the turn
        assert 0.0 < r["min_p"] <= 1.0
    # a random 16-token model spreads its mass: some sampled token is far below certainty
    assert min(r["min_p"] for r in rows) < 0.5


def test_a_fresh_optimizer_drops_adams_moments_and_starts_the_warm_up_again() -> None:
    """--fresh-optimizer: each proxy step begins as a device step does (a run of its own from the carried actor)."""
    from types import SimpleNamespace

    model = torch.nn.Linear(4, 4)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model(torch.randn(2, 4)).sum().backward()
    optimizer.step()
    learner = SimpleNamespace(actor=SimpleNamespace(optimizer=optimizer), actor_steps=6)
    reset_optimizer(learner)
    assert len(optimizer.state) == 0 and learner.actor_steps == 0
    model(torch.randn(2, 4)).sum().backward()
    optimizer.step()  # the moments are built again, from step 1
    assert [int(v["step"]) for v in optimizer.state.values()] == [1, 1]


def test_moments_carried_through_their_file_keep_adams_state_and_step_count(tmp_path) -> None:
    """--moments-file: the proxy's step begins as a device step does since session 32 (moments saved, the optimizer
    cleared, loaded back): Adam's count goes on and the next update is the one the kept optimizer would take."""
    from cuda_agent.training.engines.deepspeed_engine import build_train_engine
    from cuda_agent.training.engines.models import load_causal_lm
    from cuda_agent.training.ppo_update import Learner
    from cuda_agent.training.settings import EngineSettings

    cfg = {"model_type": "llama", "vocab_size": 32, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1,
           "num_attention_heads": 2, "num_key_value_heads": 2, "max_position_embeddings": 32}
    ids = torch.randint(0, 32, (2, 8), generator=torch.Generator().manual_seed(0))

    def step(engine) -> None:
        engine.backward(engine(input_ids=ids, labels=ids).loss)
        engine.step()

    engines = [build_train_engine(load_causal_lm(cfg, seed=1), 1e-2, EngineSettings(zero_stage=0, dtype="fp32"))
               for _ in range(2)]
    for e in engines:
        step(e)
        step(e)
    learner = Learner(engines[1], actor_steps=2)
    carry_through_file(learner, tmp_path / "m.safetensors")
    assert learner.actor_steps == 2
    assert sorted({int(v["step"]) for v in engines[1].optimizer.state.values()}) == [2]
    for e in engines:
        step(e)
    kept, carried = engines[0].module.state_dict(), engines[1].module.state_dict()
    assert all(torch.allclose(kept[k], carried[k], rtol=1e-4, atol=1e-4) for k in kept)
