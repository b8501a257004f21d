"""The rollout engine in a child process: the same samples as in-process, weights updates, and clear failures."""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path

import pytest
import torch

from cuda_agent.protocols import SamplingParams
from cuda_agent.testing.tiny_lm import build_tiny_lm

REQUESTS = [([5, 6, 7, 8, 9], SamplingParams(max_new_tokens=9, seed=3)),
            ([12, 13], SamplingParams(max_new_tokens=4, seed=4)),
            ([20, 21, 22], SamplingParams(max_new_tokens=6, temperature=0.0))]


@pytest.fixture(scope="module")
def process_engine(tiny_lm_dir: Path):
    from cuda_agent.training.rollout.process_engine import ProcessRolloutEngine

    engine = ProcessRolloutEngine(tiny_lm_dir, batch_size=8)
    yield engine
    engine.close()


def test_the_child_samples_exactly_what_the_in_process_engine_samples(tiny_lm_dir: Path, process_engine) -> None:
    from cuda_agent.training.rollout.hf_engine import HFRolloutEngine

    assert process_engine.pid != os.getpid()
    local = HFRolloutEngine(tiny_lm_dir, batch_size=8)
    want = local.generate_requests(REQUESTS)
    got = process_engine.generate_requests(REQUESTS)
    assert [g.output_ids for g in got] == [g.output_ids for g in want]
    assert [g.finish_reason for g in got] == [g.finish_reason for g in want]
    for g, w in zip(got, want):
        assert torch.allclose(torch.tensor(g.logprobs), torch.tensor(w.logprobs), atol=1e-6)
    assert process_engine.eos_ids == local.eos_ids and process_engine.pad_id == local.pad_id
    prof = process_engine.profile  # measured in the child, for the batch just served
    # two batches (the sampled rows share one, the greedy row has its own), each as long as its longest row
    steps = max(len(want[0].output_ids), len(want[1].output_ids)) + len(want[2].output_ids)
    assert prof.steps == local.profile.steps == steps
    assert 0 < prof.sync_s <= prof.wall_s and prof.cpu_s > 0


def test_concurrent_batches_through_the_batching_engine_stay_per_row_exact(tiny_lm_dir: Path, process_engine) -> None:
    from cuda_agent.training.logprobs import token_logprobs
    from cuda_agent.training.rollout.batching import BatchingEngine
    from cuda_agent.training.rollout.hf_engine import HFRolloutEngine

    batching = BatchingEngine(process_engine, gather_s=600, expected=lambda: len(REQUESTS))
    results: dict[int, object] = {}

    def call(i: int) -> None:
        results[i] = batching.generate([REQUESTS[i][0]], REQUESTS[i][1])[0]

    threads = [threading.Thread(target=call, args=(i,)) for i in range(len(REQUESTS))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    batching.close()
    assert batching.stats.batches == 1 and batching.stats.max_rows == 3  # one batch served all three callers
    model = HFRolloutEngine(tiny_lm_dir).model
    for i, (prompt, _) in enumerate(REQUESTS):
        g = results[i]
        with torch.no_grad():
            lp = token_logprobs(model, torch.tensor([prompt + g.output_ids]))[0, len(prompt) - 1:]
        if REQUESTS[i][1].temperature > 0:
            assert torch.allclose(lp, torch.tensor(g.logprobs), atol=1e-5), (i, lp, g.logprobs)


def test_weights_update_from_a_folder_and_from_a_state_dict(tiny_lm_dir: Path, tmp_path: Path) -> None:
    from transformers import AutoModelForCausalLM

    from cuda_agent.training.rollout.hf_engine import HFRolloutEngine
    from cuda_agent.training.rollout.process_engine import ProcessRolloutEngine

    other = build_tiny_lm(tmp_path / "other", seed=7)
    greedy = [([5, 6, 7, 8], SamplingParams(max_new_tokens=8, temperature=0.0))]
    want_other = HFRolloutEngine(other).generate_requests(greedy)[0].logprobs
    want_base = HFRolloutEngine(tiny_lm_dir).generate_requests(greedy)[0].logprobs
    assert want_other != want_base
    engine = ProcessRolloutEngine(tiny_lm_dir)
    try:
        engine.update_weights(other)
        assert engine.generate_requests(greedy)[0].logprobs == pytest.approx(want_other, abs=1e-6)
        engine.update_weights(AutoModelForCausalLM.from_pretrained(tiny_lm_dir).state_dict())
        assert engine.generate_requests(greedy)[0].logprobs == pytest.approx(want_base, abs=1e-6)
        with pytest.raises(RuntimeError, match="does not match the rollout model"):
            engine.update_weights({"not.a.weight": torch.zeros(2)})
        assert engine.generate_requests(greedy)[0].logprobs == pytest.approx(want_base, abs=1e-6)  # still serving
    finally:
        engine.close()


def test_a_killed_child_turns_the_next_call_into_an_error_naming_the_signal(tiny_lm_dir: Path) -> None:
    from cuda_agent.training.rollout.process_engine import GenerationProcessError, ProcessRolloutEngine

    engine = ProcessRolloutEngine(tiny_lm_dir)
    try:
        os.kill(engine.pid, signal.SIGKILL)
        with pytest.raises(GenerationProcessError, match=r"died before generate \(killed by signal 9\)"):
            engine.generate_requests(REQUESTS[:1])
    finally:
        engine.close()


def test_a_folder_that_does_not_load_fails_the_start_with_the_childs_error(tmp_path: Path) -> None:
    from cuda_agent.training.rollout.process_engine import GenerationProcessError, ProcessRolloutEngine

    with pytest.raises(FileNotFoundError, match="has no config.json"):
        ProcessRolloutEngine(tmp_path)
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(GenerationProcessError, match=r"start \(loading .*\) failed in the child"):
        ProcessRolloutEngine(tmp_path)


def test_a_child_holding_the_device_lock_per_step_pauses_while_a_timed_batch_holds_it(tiny_lm_dir: Path) -> None:
    """``hold_steps``: the child takes the CPU device's lock shared around each decode step, so a generation asked for
    while this process holds it exclusively (a timed batch) waits, then samples what it would have."""
    import time

    from cuda_agent.harness.device_lock import device_timing_lock
    from cuda_agent.training.rollout.process_engine import ProcessRolloutEngine

    engine = ProcessRolloutEngine(tiny_lm_dir, batch_size=8, hold_steps=True)
    try:
        want = engine.generate_requests(REQUESTS)
        got: list = []
        worker = threading.Thread(target=lambda: got.extend(engine.generate_requests(REQUESTS)))
        with device_timing_lock("cpu", 0):
            worker.start()
            worker.join(timeout=1.0)
            assert worker.is_alive() and not got  # the child's first step waits for the timed batch
            released = time.perf_counter()
        worker.join(timeout=60)
        assert [g.output_ids for g in got] == [g.output_ids for g in want]
        assert engine.profile.hold_s >= 0.5 and time.perf_counter() - released < 60
    finally:
        engine.close()
