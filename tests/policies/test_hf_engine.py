"""HFRolloutEngine: batched sampling with left padding, seeds, stop handling, weight updates."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from cuda_agent.protocols import RolloutEngine, SamplingParams


@pytest.fixture(scope="module")
def engine(tiny_lm_dir: Path):
    from cuda_agent.training.rollout.hf_engine import HFRolloutEngine

    return HFRolloutEngine(tiny_lm_dir, batch_size=4)


def test_batched_prompts_of_different_lengths_match_unbatched_recomputation(engine) -> None:
    from cuda_agent.training.logprobs import token_logprobs

    assert isinstance(engine, RolloutEngine)
    prompts = [[5, 6, 7, 8, 9, 10, 11], [12, 13], [14, 15, 16, 17]]
    gens = engine.generate(prompts, SamplingParams(max_new_tokens=6, seed=1))
    assert len(gens) == 3
    for p, g in zip(prompts, gens):
        assert len(g.output_ids) == len(g.logprobs) and 0 < len(g.output_ids) <= 6
        with torch.no_grad():
            lp = token_logprobs(engine.model, torch.tensor([p + g.output_ids]))[0, len(p) - 1:]
        assert torch.allclose(lp, torch.tensor(g.logprobs), atol=1e-5), (lp, g.logprobs)
        if g.finish_reason == "length":
            assert len(g.output_ids) == 6


def test_left_padded_batch_recomputation_with_attention_mask(engine) -> None:
    from cuda_agent.training.logprobs import token_logprobs

    seqs = [[5, 6, 7, 8, 9], [10, 11, 12]]
    pad = engine.pad_id
    ids = torch.tensor([seqs[0], [pad, pad] + seqs[1]])
    mask = torch.tensor([[1] * 5, [0, 0, 1, 1, 1]])
    with torch.no_grad():
        batched = token_logprobs(engine.model, ids, mask)
        single = token_logprobs(engine.model, torch.tensor([seqs[1]]))
    assert batched.shape == (2, 4)
    assert torch.allclose(batched[1, 2:], single[0], atol=1e-5)


def test_seeds_reproduce_and_differ(engine) -> None:
    p = [[5, 6, 7]]
    a = engine.generate(p, SamplingParams(max_new_tokens=8, seed=7))[0].output_ids
    b = engine.generate(p, SamplingParams(max_new_tokens=8, seed=7))[0].output_ids
    c = engine.generate(p, SamplingParams(max_new_tokens=8, seed=8))[0].output_ids
    assert a == b and a != c


def test_greedy_and_temperature_logprobs(engine) -> None:
    from cuda_agent.training.logprobs import token_logprobs

    p = [5, 6, 7]
    g = engine.generate([p], SamplingParams(max_new_tokens=5, temperature=0))[0]
    with torch.no_grad():
        logits = engine.model(torch.tensor([p])).logits[0, -1]
    assert g.output_ids[0] == int(logits.argmax())
    hot = engine.generate([p], SamplingParams(max_new_tokens=5, temperature=0.7, seed=0))[0]
    with torch.no_grad():
        lp = token_logprobs(engine.model, torch.tensor([p + hot.output_ids]), temperature=0.7)[0, len(p) - 1:]
    assert torch.allclose(lp, torch.tensor(hot.logprobs), atol=1e-5)


def test_update_weights_from_folder_and_state_dict(tiny_lm_dir: Path, tmp_path: Path) -> None:
    from cuda_agent.testing.tiny_lm import build_tiny_lm
    from cuda_agent.training.rollout.hf_engine import HFRolloutEngine

    eng = HFRolloutEngine(tiny_lm_dir)
    original = {k: v.clone() for k, v in eng.model.state_dict().items()}
    params = SamplingParams(max_new_tokens=6, seed=0)
    before = eng.generate([[5, 6, 7]], params)[0]
    eng.update_weights(build_tiny_lm(tmp_path / "other", seed=1))
    assert not torch.equal(eng.model.lm_head.weight, original["lm_head.weight"])
    eng.update_weights(original)
    again = eng.generate([[5, 6, 7]], params)[0]
    assert again.output_ids == before.output_ids
    with pytest.raises(ValueError, match="does not match"):
        eng.update_weights({"not.a.weight": torch.zeros(1)})


def test_stop_string_ends_generation_after_the_matching_token(engine) -> None:
    p = [[5, 6, 7]]
    free = engine.generate(p, SamplingParams(max_new_tokens=6, temperature=0))[0]
    texts = [engine.tokenizer.decode(free.output_ids[: k + 1]) for k in range(len(free.output_ids))]
    k = next((i for i, t in enumerate(texts) if t.strip() and "\ufffd" not in t), None)
    if k is None:
        pytest.skip("greedy output of the tiny model decodes to no clean text")
    stopped = engine.generate(p, SamplingParams(max_new_tokens=6, temperature=0, stop=[texts[k]]))[0]
    assert stopped.output_ids == free.output_ids[: k + 1]
    assert stopped.finish_reason == "stop"


def test_chunked_logprobs_equal_full_ones_with_gradients(tiny_lm_dir: Path) -> None:
    from transformers import AutoModelForCausalLM

    from cuda_agent.training.logprobs import token_logprobs

    model = AutoModelForCausalLM.from_pretrained(tiny_lm_dir)
    ids = torch.randint(0, 500, (2, 37), generator=torch.Generator().manual_seed(0))
    mask = torch.ones_like(ids)
    mask[1, :5] = 0
    full = token_logprobs(model, ids, mask)
    full.sum().backward()
    grad_full = model.lm_head.weight.grad.clone()
    model.zero_grad()
    chunked = token_logprobs(model, ids, mask, chunk_size=8)
    chunked.sum().backward()
    assert torch.allclose(full, chunked, atol=1e-5)
    assert torch.allclose(grad_full, model.lm_head.weight.grad, atol=1e-5)


def test_generation_never_lets_attention_pick_cudnn_and_restores_torchs_choice_after(tiny_lm_dir) -> None:
    """session 20: cuDNN's SDPA backend builds a plan per new shape, and every decode step has a new key length
    (42-62 ms per step on the H200 against 6 ms with the other backends). Generation's forwards run with cuDNN
    attention disabled; torch's own setting is back once the batch is done."""
    import torch

    from cuda_agent.protocols import SamplingParams
    from cuda_agent.training.rollout.hf_engine import HFRolloutEngine

    engine = HFRolloutEngine(tiny_lm_dir)
    seen: list[tuple[bool, bool]] = []
    hook = engine.model.register_forward_pre_hook(
        lambda *_: seen.append((torch.backends.cuda.cudnn_sdp_enabled(), torch.backends.cuda.mem_efficient_sdp_enabled())))
    before = torch.backends.cuda.cudnn_sdp_enabled()
    try:
        engine.generate_requests([([5, 6, 7], SamplingParams(max_new_tokens=5, seed=1)),
                                  ([8, 9], SamplingParams(max_new_tokens=3, seed=2))])
        assert seen and all(cudnn is False and efficient is True for cudnn, efficient in seen)
        assert torch.backends.cuda.cudnn_sdp_enabled() == before
        seen.clear()
        engine.attention = None  # torch's own choice: nothing restricted
        engine.generate_requests([([5, 6, 7], SamplingParams(max_new_tokens=2, seed=1))])
        assert seen and all(cudnn == before for cudnn, _ in seen)
    finally:
        hook.remove()


def test_the_trainers_log_probs_use_the_same_attention_kernels_as_generation(tiny_lm_dir) -> None:
    import pytest
    import torch

    from cuda_agent.training.attention import attention_backends
    from cuda_agent.training.logprobs import token_logprobs
    from cuda_agent.training.rollout.hf_engine import HFRolloutEngine

    model = HFRolloutEngine(tiny_lm_dir).model
    seen: list[bool] = []
    # the decoder runs in both paths: inside the LM's forward, and on its own in the chunked one
    hook = model.get_decoder().register_forward_pre_hook(lambda *_: seen.append(torch.backends.cuda.cudnn_sdp_enabled()))
    try:
        token_logprobs(model, torch.tensor([[5, 6, 7, 8]]))
        token_logprobs(model, torch.tensor([[5, 6, 7, 8]]), chunk_size=2)
    finally:
        hook.remove()
    assert seen == [False, False]
    assert torch.backends.cuda.cudnn_sdp_enabled()  # torch's setting is back
    with pytest.raises(ValueError, match="unknown SDPA backend.*valid: .*MATH"):
        attention_backends(["NOT_A_BACKEND"])


def test_a_timed_batch_waits_for_one_decode_step_not_for_the_whole_generation(tiny_lm_dir: Path, tmp_path: Path) -> None:
    """With the device lock held shared per decode step, an exclusive holder (a timed batch) gets the device in the
    middle of a generation, and no step runs while it holds it; the generation then finishes unchanged."""
    import threading
    import time

    from cuda_agent.harness.device_lock import SharedHold, TimingLock
    from cuda_agent.training.rollout.hf_engine import HFRolloutEngine

    lock = TimingLock("cpu0", lock_dir=tmp_path)
    engine = HFRolloutEngine(tiny_lm_dir, batch_size=2)
    params = SamplingParams(max_new_tokens=60, seed=3, temperature=0.0)
    prompts = [[5, 6, 7], [8, 9]]
    expected = engine.generate(prompts, params)

    class CountingHold(SharedHold):
        def __init__(self) -> None:
            super().__init__(lock)
            self.entered = 0

        def __enter__(self) -> CountingHold:
            super().__enter__()
            self.entered += 1
            return self

    hold = CountingHold()
    engine.step_hold = hold
    timed: dict[str, int] = {}

    def timed_batch() -> None:
        while hold.entered < 5:
            time.sleep(0.001)
        with lock:  # exclusive: waits for the step in flight only
            timed["steps_at_entry"] = hold.entered
            time.sleep(0.3)
            timed["steps_at_exit"] = hold.entered

    t = threading.Thread(target=timed_batch)
    t.start()
    got = engine.generate(prompts, params)
    t.join(timeout=30)
    assert [g.output_ids for g in got] == [g.output_ids for g in expected]  # the hold changes nothing sampled
    assert timed["steps_at_entry"] == timed["steps_at_exit"] < engine.profile.steps == hold.entered
    assert engine.profile.hold_s >= 0.25  # the step after the timed batch waited for it
