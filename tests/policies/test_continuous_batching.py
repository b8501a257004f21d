"""Continuous batching: rows join the live batch between steps and return the moment they end, each exact.

A real tiny transformers model on the CPU; the in-process engine (a serving thread) and the generation child
process run the same decoder.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
import torch

from cuda_agent.protocols import SamplingParams


@pytest.fixture(scope="module")
def hf_engine(tiny_lm_dir: Path):
    from cuda_agent.training.rollout.hf_engine import HFRolloutEngine

    return HFRolloutEngine(tiny_lm_dir, batch_size=8)


def recomputed(model, prompt: list[int], output: list[int]) -> torch.Tensor:
    from cuda_agent.training.logprobs import token_logprobs

    with torch.no_grad():
        return token_logprobs(model, torch.tensor([prompt + output]))[0, len(prompt) - 1:]


PROMPTS = [[5, 6, 7, 8, 9, 10, 11], [12, 13], [14, 15, 16, 17], [20, 21, 22, 23, 24]]


def test_rows_admitted_at_different_steps_decode_as_they_would_alone(hf_engine) -> None:
    """Greedy rows joining a running batch (other columns, a trimmed cache after rows leave) give the tokens a
    batch of one gives, and the log-probs the trainer recomputes."""
    from cuda_agent.training.rollout.continuous import ContinuousDecoder

    greedy = [SamplingParams(max_new_tokens=n, temperature=0) for n in (20, 3, 12, 6)]
    alone = [hf_engine.generate([p], s)[0] for p, s in zip(PROMPTS, greedy)]
    dec = ContinuousDecoder(hf_engine, max_rows=8, seed=0)
    got: dict[int, object] = {}
    got.update(dec.admit([(0, PROMPTS[0], greedy[0])]))
    for _ in range(2):
        got.update(dec.step())
    got.update(dec.admit([(1, PROMPTS[1], greedy[1]), (2, PROMPTS[2], greedy[2])]))  # join a running row
    got.update(dec.step())
    got.update(dec.admit([(3, PROMPTS[3], greedy[3])]))
    while dec.live:
        got.update(dec.step())
    assert sorted(got) == [0, 1, 2, 3]
    for i in range(4):
        assert got[i].output_ids == alone[i].output_ids, i
        assert got[i].finish_reason == alone[i].finish_reason
        assert torch.allclose(recomputed(hf_engine.model, PROMPTS[i], got[i].output_ids), torch.tensor(got[i].logprobs),
                              atol=1e-5), i
    assert dec.stats.ended == 4 and dec.stats.admitted == 4 and dec.stats.max_rows == 4  # row 1 still decoding at row 3's admission


def test_the_live_batch_keeps_no_autograd_history(hf_engine) -> None:
    """Session 27 on the H200: the first continuous decoder ran its forwards with autograd on, every step's KV
    cache held the graph of all earlier steps, and the generation child reached 126 GiB within a minute."""
    from cuda_agent.training.rollout.continuous import ContinuousDecoder

    assert any(p.requires_grad for p in hf_engine.model.parameters())  # a trainer's model: gradients on
    dec = ContinuousDecoder(hf_engine, max_rows=4, seed=2)
    dec.admit([(0, PROMPTS[0], SamplingParams(max_new_tokens=50, temperature=0))])
    dec.step()
    dec.admit([(1, PROMPTS[1], SamplingParams(max_new_tokens=50, temperature=0))])
    dec.step()
    layer = dec._cache.layers[0]
    assert not layer.keys.requires_grad and layer.keys.grad_fn is None
    assert not dec._token.requires_grad


def test_a_short_row_returns_while_a_long_one_goes_on_and_the_padding_is_trimmed(hf_engine) -> None:
    from cuda_agent.training.rollout.continuous import ContinuousDecoder

    dec = ContinuousDecoder(hf_engine, max_rows=4, seed=1)
    long_prompt = list(range(3, 40))
    ended = dec.admit([(0, long_prompt, SamplingParams(max_new_tokens=30, seed=1)),
                       (1, [7, 8], SamplingParams(max_new_tokens=2, seed=1))])
    ended += dec.step()
    assert [rid for rid, _ in ended] == [1] and dec.live == 1  # the short row is back after its second token
    dec.admit([(2, [9, 10, 11], SamplingParams(max_new_tokens=25, seed=1))])
    width = dec._mask.shape[1]
    ended = []
    while len(ended) < 1:
        ended += dec.step()
    dec.step()  # the ended row leaves inside the next step's hold
    if dec.live:
        assert dec._mask.shape[1] < width + 30  # columns only the long row needed are gone
        assert bool(dec._mask[:, 0].any())
        assert dec._cache.get_seq_length() == dec._mask.shape[1]


def test_sampled_rows_report_the_logprobs_the_trainer_recomputes(hf_engine) -> None:
    from cuda_agent.training.rollout.continuous import ContinuousDecoder

    dec = ContinuousDecoder(hf_engine, max_rows=8, seed=7)
    params = SamplingParams(max_new_tokens=15, temperature=0.8, top_p=0.9)
    got = dict(dec.admit([(i, p, params) for i, p in enumerate(PROMPTS[:2])]))
    got.update(dec.step())
    got.update(dec.admit([(i + 2, p, params) for i, p in enumerate(PROMPTS[2:])]))
    while dec.live:
        got.update(dec.step())
    from cuda_agent.training.rollout.hf_engine import _nucleus_mask

    for i, p in enumerate(PROMPTS):
        g = got[i]
        assert len(g.logprobs) == len(g.output_ids) > 0
        with torch.no_grad():
            logits = hf_engine.model(torch.tensor([p + g.output_ids])).logits[0, len(p) - 1:-1].float()
        tempered = _nucleus_mask(logits / 0.8, 0.9).log_softmax(-1)
        want = tempered.gather(-1, torch.tensor(g.output_ids)[:, None])[:, 0]
        assert torch.allclose(want, torch.tensor(g.logprobs), atol=1e-4), i


def test_rows_with_other_sampling_settings_wait_for_the_batch_to_drain(hf_engine) -> None:
    from cuda_agent.training.rollout.continuous import ContinuousDecoder

    dec = ContinuousDecoder(hf_engine, max_rows=4)
    dec.admit([(0, [5, 6], SamplingParams(max_new_tokens=5, temperature=1.0))])
    assert not dec.accepts(SamplingParams(temperature=0))
    with pytest.raises(ValueError, match="share temperature and top-p"):
        dec.admit([(1, [5, 6], SamplingParams(temperature=0))])
    with pytest.raises(ValueError, match="do not fit"):
        dec.admit([(i, [5], SamplingParams()) for i in range(2, 6)])


def test_concurrent_callers_each_return_when_their_own_rows_end(hf_engine) -> None:
    """Through the serving thread: a caller asking for 2 tokens returns while a 200-token caller still runs."""
    from cuda_agent.training.rollout.continuous_serving import ContinuousEngine

    engine = ContinuousEngine(hf_engine, max_rows=8, seed=3)
    order: list[str] = []
    results: dict[str, object] = {}

    def call(name: str, prompt: list[int], n: int) -> None:
        results[name] = engine.generate([prompt], SamplingParams(max_new_tokens=n, temperature=0.0))[0]
        order.append(name)

    long = threading.Thread(target=call, args=("long", PROMPTS[0], 200))
    long.start()
    while engine.decoder.stats.steps < 3:  # the long row is decoding
        time.sleep(0.001)
    call("short", PROMPTS[1], 2)
    long.join()
    assert order == ["short", "long"]
    assert len(results["short"].output_ids) <= 2
    assert results["long"].output_ids == hf_engine.generate([PROMPTS[0]], SamplingParams(max_new_tokens=200, temperature=0))[0].output_ids
    stats = engine.stats.as_dict()
    assert stats["gen_requests"] == 2 and stats["gen_max_rows"] == 2 and stats["gen_rows"] == 2
    with pytest.raises(RuntimeError, match="update_weights while"):
        hold = threading.Thread(target=call, args=("again", PROMPTS[0], 300))
        hold.start()
        while engine.decoder.live == 0:
            time.sleep(0.001)
        try:
            engine.update_weights(hf_engine.model.state_dict())
        finally:
            hold.join()
    engine.update_weights(hf_engine.model.state_dict())  # idle: accepted
    engine.close()
    with pytest.raises(RuntimeError, match="has ended"):
        engine.generate([PROMPTS[0]], SamplingParams(max_new_tokens=2))


def test_stop_strings_and_eos_end_a_row_alone(hf_engine) -> None:
    from cuda_agent.training.rollout.continuous import ContinuousDecoder

    first = hf_engine.generate([PROMPTS[2]], SamplingParams(max_new_tokens=1, temperature=0))[0].output_ids[0]
    eos_before = set(hf_engine.eos_ids)
    hf_engine.eos_ids.add(first)  # the greedy row's first token now ends it
    try:
        dec = ContinuousDecoder(hf_engine, max_rows=4)
        ended = dec.admit([(0, PROMPTS[2], SamplingParams(max_new_tokens=9, temperature=0)),
                           (1, PROMPTS[0], SamplingParams(max_new_tokens=4, temperature=0))])
    finally:
        hf_engine.eos_ids.clear()
        hf_engine.eos_ids.update(eos_before)
    assert [(rid, g.finish_reason, g.output_ids) for rid, g in ended][:1] == [(0, "stop", [first])]
    assert dec.live == (0 if any(rid == 1 for rid, _ in ended) else 1)


def test_the_generation_child_runs_continuous_batching_exactly(tiny_lm_dir: Path, hf_engine) -> None:
    from cuda_agent.training.rollout.process_engine import ContinuousProcessEngine

    engine = ContinuousProcessEngine(tiny_lm_dir, batch_size=8)
    try:
        results: dict[int, object] = {}
        limits = [40, 2, 9, 5]

        def call(i: int) -> None:
            results[i] = engine.generate([PROMPTS[i]], SamplingParams(max_new_tokens=limits[i], temperature=0))[0]

        threads = [threading.Thread(target=call, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
            time.sleep(0.01)  # arrivals spread over the long row's steps
        for t in threads:
            t.join()
        for i in range(4):
            alone = hf_engine.generate([PROMPTS[i]], SamplingParams(max_new_tokens=limits[i], temperature=0))[0]
            assert results[i].output_ids == alone.output_ids, i
            assert torch.allclose(recomputed(hf_engine.model, PROMPTS[i], results[i].output_ids),
                                  torch.tensor(results[i].logprobs), atol=1e-5), i
        stats = engine.stats.as_dict()
        assert stats["gen_rows"] == 4 and stats["gen_steps"] >= 39
        both = engine.generate_requests([(PROMPTS[0], SamplingParams(max_new_tokens=3, temperature=0)),
                                         (PROMPTS[1], SamplingParams(max_new_tokens=3, temperature=0))])
        assert [len(g.output_ids) for g in both] == [3, 3] or all(g.finish_reason == "stop" for g in both)
        engine.update_weights(tiny_lm_dir)  # idle: the child reloads
    finally:
        engine.close()
    assert not engine._proc.is_alive()


def test_a_killed_child_fails_the_next_call_with_its_signal(tiny_lm_dir: Path) -> None:
    import os
    import signal

    from cuda_agent.training.rollout.process_engine import ContinuousProcessEngine, GenerationProcessError

    engine = ContinuousProcessEngine(tiny_lm_dir, batch_size=4)
    engine.generate([PROMPTS[0]], SamplingParams(max_new_tokens=3))
    os.kill(engine.pid, signal.SIGKILL)
    engine._proc.join(timeout=30)
    with pytest.raises((RuntimeError, GenerationProcessError), match="signal 9"):
        engine.generate([PROMPTS[0]], SamplingParams(max_new_tokens=3))
    engine.close()


@pytest.mark.parametrize("engine_process", [True, False])
def test_concurrent_kernel_rollouts_run_episodes_on_continuous_generation(tiny_lm_dir: Path, tmp_path: Path,
                                                                          engine_process: bool) -> None:
    """The training rollouts with ``rollout.batching: continuous``: real episodes of the cpu backend, the policy's
    turns served by the continuous engine (in the generation child or a thread), every turn's tokens recorded."""
    import json

    from cuda_agent.config import RunConfig
    from cuda_agent.plugin_manager import PluginManager
    from cuda_agent.training.settings import RolloutSettings
    from cuda_agent.training.stages.episodes import load_tasks
    from cuda_agent.training.stages.kernel_rollouts import ConcurrentKernelRollouts, EpisodeJob

    task = load_tasks([str(Path(__file__).resolve().parents[2] / "examples" / "tasks" / "swish.py")], "cpu")[0]
    cfg = RunConfig.model_validate({"backend": "cpu", "agent": {"max_turns": 2}})
    settings = RolloutSettings(concurrency=3, build_workers=1, batching="continuous", engine_process=engine_process)
    rollouts = ConcurrentKernelRollouts(cfg, PluginManager(), settings, "cpu")
    jobs = [EpisodeJob(task, tmp_path / f"{i:03d}", i) for i in range(3)]
    try:
        stats = rollouts.run(jobs, tiny_lm_dir, SamplingParams(max_new_tokens=12))
        counters = rollouts.engine(tiny_lm_dir, refresh=False).stats.as_dict()
    finally:
        rollouts.close()
    assert stats.errors == [] and stats.not_admitted == 0
    turns = 0
    for job in jobs:
        lines = (job.out_dir / "trajectory.jsonl").read_text().splitlines()
        turns += sum(1 for x in lines if json.loads(x).get("timings", {}).get("policy_s") is not None)
    assert turns >= 3
    assert counters["gen_requests"] == counters["gen_rows"] >= turns



def test_training_rollouts_stop_at_train_max_turns_and_evaluations_at_the_runs_limit(tiny_lm_dir: Path,
                                                                                     tmp_path: Path) -> None:
    """``rollout.train_max_turns``: a kernel stage's training episodes (``collect``) end at that limit, its held-out
    evaluations (``evaluate``) at the run's ``agent.max_turns``. Real cpu-backend episodes of a tiny random policy
    that never submits, so every episode runs to its limit."""
    import json
    from types import SimpleNamespace

    import torch
    from transformers import AutoModelForCausalLM

    from cuda_agent.config import RunConfig
    from cuda_agent.plugin_manager import PluginManager
    from cuda_agent.training.settings import RolloutSettings
    from cuda_agent.training.stages.episodes import KernelEpisodeSource, load_tasks

    swish = str(Path(__file__).resolve().parents[2] / "examples" / "tasks" / "swish.py")
    rt = SimpleNamespace(config=RunConfig.model_validate({"backend": "cpu", "agent": {"max_turns": 3}}),
                         tokenizer_dir=tiny_lm_dir, dir=tmp_path / "stage", rank=0,
                         ctx=SimpleNamespace(plugin_manager=PluginManager()), on_close=lambda fn: None)
    source = KernelEpisodeSource(rt, mode="agent", tasks=[swish], max_new_tokens=8, temperature=1.0,
                                 vllm=None, rollout=RolloutSettings(concurrency=2, build_workers=1,
                                                                    train_max_turns=1))
    actor = SimpleNamespace(module=AutoModelForCausalLM.from_pretrained(tiny_lm_dir), global_steps=0,
                            zero_optimization_stage=lambda: 0)  # the surface of a DeepSpeed engine export reads

    def turns(folder: Path) -> list[tuple[str, int]]:
        out = []
        for traj in sorted(folder.rglob("trajectory.jsonl")):
            end = [json.loads(x) for x in traj.read_text().splitlines()][-1]
            out.append((end.get("exit"), end.get("turns")))
        return out

    try:
        episodes = source.collect(actor, 2, step=1, gen=torch.Generator().manual_seed(0))
        source.evaluate(tiny_lm_dir, load_tasks([swish], "cpu"), tmp_path / "heldout")
    finally:
        source.close()
    assert len(episodes) == 2
    assert turns(rt.dir / "episodes") == [("max_turns", 1), ("max_turns", 1)]
    assert turns(tmp_path / "heldout") == [("max_turns", 3)]
    with pytest.raises(ValueError):
        RolloutSettings(train_max_turns=0)
