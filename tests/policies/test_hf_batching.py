"""Batched generation across concurrent episodes: rows share a batch, each keeps exactly what it sampled."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
import torch

from cuda_agent.protocols import SamplingParams


@pytest.fixture(scope="module")
def hf_engine(tiny_lm_dir: Path):
    from cuda_agent.training.rollout.hf_engine import HFRolloutEngine

    return HFRolloutEngine(tiny_lm_dir, batch_size=8)


def test_concurrent_callers_share_one_batch_and_get_their_own_sampled_tokens_and_logprobs(hf_engine) -> None:
    from cuda_agent.training.logprobs import token_logprobs
    from cuda_agent.training.rollout.batching import BatchingEngine

    prompts = [[5, 6, 7, 8, 9, 10, 11], [12, 13], [14, 15, 16, 17], [20, 21, 22, 23, 24]]
    limits = [7, 3, 12, 5]
    # The server waits until all four requests are pending (no timing involved: it is woken by each arrival).
    batching = BatchingEngine(hf_engine, gather_s=600, expected=lambda: len(prompts))
    results: dict[int, object] = {}

    def call(i: int) -> None:
        results[i] = batching.generate([prompts[i]], SamplingParams(max_new_tokens=limits[i], seed=100 + i))[0]

    threads = [threading.Thread(target=call, args=(i,)) for i in range(len(prompts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    batching.close()
    assert batching.stats.batches == 1 and batching.stats.max_rows == 4
    for i, p in enumerate(prompts):
        g = results[i]
        assert 0 < len(g.output_ids) <= limits[i] and len(g.logprobs) == len(g.output_ids)
        if g.finish_reason == "length":
            assert len(g.output_ids) == limits[i]
        with torch.no_grad():
            lp = token_logprobs(hf_engine.model, torch.tensor([p + g.output_ids]))[0, len(p) - 1:]
        assert torch.allclose(lp, torch.tensor(g.logprobs), atol=1e-5), (i, lp, g.logprobs)


def test_rows_that_finish_early_leave_the_batch_and_the_rest_stay_exact(hf_engine) -> None:
    """Per-row limits: short rows stop (the KV cache shrinks), long rows continue with the right positions."""
    from cuda_agent.training.logprobs import token_logprobs

    reqs = [([5, 6, 7], SamplingParams(max_new_tokens=1, seed=1)), ([9, 10, 11, 12, 13, 14], SamplingParams(max_new_tokens=16, seed=1)),
            ([30, 31], SamplingParams(max_new_tokens=2, seed=1))]
    gens = hf_engine.generate_requests(reqs)
    assert [len(g.output_ids) <= r[1].max_new_tokens for g, r in zip(gens, reqs)] == [True] * 3
    assert len(gens[0].output_ids) == 1
    for (p, _), g in zip(reqs, gens):
        with torch.no_grad():
            lp = token_logprobs(hf_engine.model, torch.tensor([p + g.output_ids]))[0, len(p) - 1:]
        assert torch.allclose(lp, torch.tensor(g.logprobs), atol=1e-5)


def test_requests_with_other_sampling_settings_are_batched_apart(hf_engine) -> None:
    reqs = [([5, 6, 7], SamplingParams(max_new_tokens=4, temperature=0)), ([5, 6, 7], SamplingParams(max_new_tokens=4, seed=3))]
    greedy = hf_engine.generate_requests(reqs)[0]
    alone = hf_engine.generate([[5, 6, 7]], SamplingParams(max_new_tokens=4, temperature=0))[0]
    assert greedy.output_ids == alone.output_ids


def test_a_failing_engine_reaches_every_waiting_caller() -> None:
    from cuda_agent.training.rollout.batching import BatchingEngine

    class Broken:
        def generate_requests(self, rows):
            raise ValueError("out of memory, say")

    batching = BatchingEngine(Broken())
    with pytest.raises(RuntimeError, match="out of memory"):
        batching.generate([[1, 2]], SamplingParams(max_new_tokens=2))
    batching.close()
    with pytest.raises(RuntimeError, match="closed"):
        batching.generate([[1, 2]], SamplingParams(max_new_tokens=2))


@pytest.mark.parametrize("batching", ["batch", "continuous"])
def test_hf_policies_batched_across_episodes_share_one_engine(tiny_lm_dir: Path, batching: str) -> None:
    """``batch_across_episodes``: concurrent episodes' policies generate through one engine; each keeps its context.
    ``batching=continuous``: that engine is the continuous one, a separate engine from the batch one."""
    from cuda_agent.plugins.policies.hf import HFPolicyConfig, build_hf_policy
    from cuda_agent.schemas.messages import Message
    from cuda_agent.training.rollout.batching import BatchingEngine
    from cuda_agent.training.rollout.continuous_serving import ContinuousEngine

    cfg = HFPolicyConfig(model=str(tiny_lm_dir), max_new_tokens=6, batch_across_episodes=True, batching=batching)
    a, b = build_hf_policy(cfg), build_hf_policy(cfg.model_copy(update={"seed": 5}))
    assert a.engine is b.engine
    assert isinstance(a.engine, ContinuousEngine if batching == "continuous" else BatchingEngine)
    other = "batch" if batching == "continuous" else "continuous"
    assert build_hf_policy(cfg.model_copy(update={"batching": other})).engine is not a.engine
    out: dict[str, object] = {}

    def run(name: str, policy) -> None:
        msgs = [Message(role="system", content="s"), Message(role="user", content=name)]
        out[name] = policy.query(msgs, [])

    threads = [threading.Thread(target=run, args=(n, p)) for n, p in (("left", a), ("right", b))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert a.context_ids != b.context_ids  # each episode's own conversation
    assert all(out[n].output_ids == ctx[-len(out[n].output_ids):] for n, ctx in (("left", a.context_ids), ("right", b.context_ids)))
    assert a.engine.stats.as_dict()["gen_rows"] >= 2


def test_a_batch_waits_for_the_device_timing_lock_another_process_holds(hf_engine, tmp_path) -> None:
    """session 19: generation beside timed measurements on one GPU slowed both (75-130 ms per decode step) and
    times candidates while the policy's kernels share the device. With ``hold`` set to the device's timing lock,
    a batch starts only after a timing process (here a real second process holding the same flock) lets go."""
    import subprocess
    import sys
    import time

    from cuda_agent.harness.timing_stats import device_timing_lock
    from cuda_agent.training.rollout.batching import BatchingEngine

    lock = device_timing_lock("cpu", 0, lock_dir=tmp_path)
    released = tmp_path / "released"
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import fcntl, os, sys, time\n"
         f"fd = os.open({str(lock.path)!r}, os.O_CREAT | os.O_RDWR)\n"
         "fcntl.flock(fd, fcntl.LOCK_EX)\n"
         "print('held', flush=True)\n"
         "time.sleep(1.5)\n"
         f"open({str(released)!r}, 'w').write(repr(time.time()))\n"
         "fcntl.flock(fd, fcntl.LOCK_UN)\n"],
        stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    batching = BatchingEngine(hf_engine, hold=lock)
    try:
        gen = batching.generate([[5, 6, 7]], SamplingParams(max_new_tokens=4, seed=1))[0]
        done = time.time()
    finally:
        batching.close()
        holder.wait(timeout=30)
    assert len(gen.output_ids) >= 1
    assert done >= float(released.read_text())  # generated only once the timing process had let go
    with lock:  # and the batch let go of the lock afterwards
        pass


def test_rollouts_generate_under_the_lock_their_evaluators_time_under() -> None:
    """The concurrent rollouts' generation hold is the very lock the backend's evaluator times under (same file),
    and nothing is held with ``exclusive_device: false`` or when the engine is not on a timed device."""
    from cuda_agent.config import RunConfig
    from cuda_agent.harness.timing_stats import device_timing_lock
    from cuda_agent.plugin_manager import PluginManager
    from cuda_agent.training.settings import RolloutSettings
    from cuda_agent.training.stages.kernel_rollouts import ConcurrentKernelRollouts

    pm = PluginManager()
    cfg = RunConfig.model_validate({"backend": "cpu"})
    rollouts = ConcurrentKernelRollouts(cfg, pm, RolloutSettings(concurrency=2, build_workers=1), "cpu")
    try:
        hold = rollouts.generation_hold()
        evaluator = rollouts.pool().slots[0].backend.evaluator()  # the real harness evaluator of the cpu backend
        assert hold is not None and hold.lock.path == evaluator.lock.path == device_timing_lock("cpu", 0).path
        off = ConcurrentKernelRollouts(cfg, pm, RolloutSettings(concurrency=2, exclusive_device=False), "cpu")
        assert off.generation_hold() is None
    finally:
        rollouts.close()


def test_no_episode_starts_after_the_admission_deadline(tiny_lm_dir, tmp_path) -> None:
    """``admit_until`` in the past: the real concurrent rollouts start none of the jobs (no folder written), count
    them as not admitted, and say so in their metrics."""
    import time

    from cuda_agent.config import RunConfig
    from cuda_agent.plugin_manager import PluginManager
    from cuda_agent.protocols import SamplingParams
    from cuda_agent.training.settings import RolloutSettings
    from cuda_agent.training.stages.episodes import load_tasks
    from cuda_agent.training.stages.kernel_rollouts import ConcurrentKernelRollouts, EpisodeJob

    from pathlib import Path

    task = load_tasks([str(Path(__file__).resolve().parents[2] / "examples" / "tasks" / "swish.py")], "cpu")[0]
    cfg = RunConfig.model_validate({"backend": "cpu"})
    rollouts = ConcurrentKernelRollouts(cfg, PluginManager(), RolloutSettings(concurrency=2, build_workers=1,
                                                                               engine_process=False), "cpu")
    jobs = [EpisodeJob(task, tmp_path / f"{i:03d}", i) for i in range(3)]
    try:
        stats = rollouts.run(jobs, tiny_lm_dir, SamplingParams(max_new_tokens=4), admit_until=time.time() - 1)
    finally:
        rollouts.close()
    assert stats.not_admitted == 3 and stats.as_dict()["rollout_not_admitted"] == 3.0
    assert stats.errors == [] and not any(j.out_dir.exists() for j in jobs)
