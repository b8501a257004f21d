"""Concurrent kernel-environment episodes for training: eval's scheduler plus batched generation.

A step's episodes run on ``rollout.concurrency`` threads through
:class:`~cuda_agent.harness.evaluation.scheduling.DevicePool` (the scheduler of ``cuda-agent eval``):
compiles share a build pool, verify/profile/grade hold their device's timing lock only for the device
step, and the backends (their warm reference processes, runners and baseline caches) live as long as the
stage. Every episode's token-level policy generates through one
:class:`~cuda_agent.training.rollout.batching.BatchingEngine` over an ``hf`` engine: the requests of the
episodes ready to generate are served as one left-padded, KV-cached batch. The tokenization contract
is the same as in sequential rollouts (each episode keeps its own ``TokenizedConversation``; a row's ids
and log-probs are those sampled for it).
"""

from __future__ import annotations

import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog
import torch

from cuda_agent.schemas.task import TaskManifest
from cuda_agent.training.settings import RolloutSettings

log = structlog.get_logger("cuda_agent.training.rollouts")


@dataclass
class EpisodeJob:
    """One episode to run: its task, output folder and sampling seed."""

    task: TaskManifest
    out_dir: Path
    seed: int


@dataclass
class CollectionStats:
    """Wall time of one collection and how it was spent."""

    wall_s: float = 0.0
    episodes: int = 0
    build_s: float = 0.0
    gpu_busy_s: float = 0.0
    gpu_wait_s: float = 0.0
    not_admitted: int = 0  # episodes not started: the admission deadline had passed
    episode_s: float = 0.0  # summed wall time of the episodes
    policy_s: float = 0.0  # of which waiting for generation (queue included); the rest is the environment
    errors: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, float]:
        """Flat metrics (``rollout_*``)."""
        return {"rollout_wall_s": self.wall_s, "rollout_episodes": float(self.episodes), "rollout_build_s": self.build_s,
                "rollout_device_busy_s": self.gpu_busy_s, "rollout_device_wait_s": self.gpu_wait_s,
                "rollout_episode_s": self.episode_s, "rollout_policy_s": self.policy_s,
                "rollout_not_admitted": float(self.not_admitted),
                "rollout_env_share": 1.0 - self.policy_s / self.episode_s if self.episode_s else 0.0,
                "rollout_errors": float(len(self.errors))}


class ConcurrentKernelRollouts:
    """Runs batches of kernel episodes concurrently; one device pool and one batched engine per stage.

    :param run_config: the agent-loop config of the episodes (``RunConfig``; policy is set per episode).
    :param plugin_manager: the run's plugin manager (backends, tools, reward).
    :param settings: ``rollout`` settings (concurrency, build workers, engine batch, gathering wait, dtype).
    :param device: torch device of the generation engine.
    """

    def __init__(self, run_config: Any, plugin_manager: Any, settings: RolloutSettings, device: str) -> None:
        self.run_config = run_config
        self.pm = plugin_manager
        self.settings = settings
        self.device = device
        self._pool: Any = None
        self._engine: Any = None
        self._batching: Any = None
        self._tokenizer: Any = None
        self._live = 0
        self._lock = threading.Lock()

    # -- resources ---------------------------------------------------------------------------------
    def pool(self) -> Any:
        """The stage's device pool (built on first use): one backend per device slot."""
        if self._pool is None:
            from cuda_agent.harness.evaluation.scheduling import DevicePool

            name = self.run_config.backend
            entry = self.pm.registry.get("backend", name, where="backend")
            devices = [0]
            if name == "cuda" and torch.cuda.is_available():
                devices = list(range(torch.cuda.device_count()))
            backends = {}
            for index in devices:
                block = dict(self.run_config.plugins.get(name, {}))
                if entry.config_model is not None and "device_index" in entry.config_model.model_fields:
                    block["device_index"] = index
                backends[index] = entry.build(block)
            self._pool = DevicePool(backends, self.settings.build_workers, self.settings.device_steps)
        return self._pool

    def engine(self, model_dir: Path, refresh: bool) -> Any:
        """The batched generation engine, loaded once; ``refresh`` loads the weights in ``model_dir``."""
        from transformers import AutoTokenizer

        from cuda_agent.training.rollout.batching import BatchingEngine
        from cuda_agent.training.rollout.continuous_serving import ContinuousEngine
        from cuda_agent.training.rollout.hf_engine import HFRolloutEngine
        from cuda_agent.training.rollout.process_engine import ContinuousProcessEngine, ProcessRolloutEngine

        if self._engine is None:
            self._tokenizer = AutoTokenizer.from_pretrained(model_dir)
            # Each decode step holds the device lock (shared), so a timed batch waits for one step, not a batch.
            hold = self.generation_hold()
            continuous = self.settings.batching == "continuous"
            if self.settings.engine_process:
                kind = ContinuousProcessEngine if continuous else ProcessRolloutEngine
                self._engine = kind(model_dir, device=self.device, dtype=self.settings.dtype,
                                    batch_size=self.settings.max_batch, hold_steps=hold is not None)
            else:
                self._engine = HFRolloutEngine(model_dir, self._tokenizer, device=self.device,
                                               dtype=self.settings.dtype, batch_size=self.settings.max_batch)
                self._engine.step_hold = hold
                if continuous:
                    self._engine = ContinuousEngine(self._engine, max_rows=self.settings.max_batch)
            # A continuous engine serves concurrent callers itself; the batch engine needs the batching server.
            self._batching = self._engine if continuous else BatchingEngine(
                self._engine, gather_s=self.settings.gather_s, expected=lambda: self._live)
        elif refresh:
            self._engine.update_weights(model_dir)
        return self._batching

    def generation_hold(self) -> Any:
        """The device lock generation holds in its shared mode per decode step (``rollout.exclusive_device``), or
        None: when the engine runs on the device the backend times (``cuda:N`` with the cuda backend on device N,
        or the CPU with the cpu backend). Never beside a timed batch; beside untimed work (checks, other seeds'
        generation)."""
        if not self.settings.exclusive_device:
            return None
        from cuda_agent.harness.timing_stats import generation_hold

        engine = torch.device(self.device)
        if engine.type != self.run_config.backend:  # e.g. a cuda engine beside the cpu backend: nothing timed there
            return None
        if engine.type == "cuda":
            index = engine.index if engine.index is not None else torch.cuda.current_device()
            if index not in {slot.index for slot in self.pool().slots}:  # the pool's slots are the timed devices
                return None
        return generation_hold(self.device)

    def close(self) -> None:
        """Stop the generation server and close the backends."""
        if self._batching is not None and self._batching is not self._engine:
            self._batching.close()
        self._batching = None
        if self._engine is not None:
            getattr(self._engine, "close", lambda: None)()  # the generation process, when there is one
            self._engine = None
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    # -- running -------------------------------------------------------------------------------------
    def run(self, jobs: list[EpisodeJob], model_dir: Path, params: Any, refresh: bool = True,
            admit_until: float | None = None, max_turns: int | None = None) -> CollectionStats:
        """Run ``jobs`` concurrently with the policy in ``model_dir``; each writes its folder's trajectory.

        ``max_turns``: the episodes' turn limit instead of the run config's ``agent.max_turns`` (training
        rollouts' ``rollout.train_max_turns``).

        An episode that raises is recorded in ``stats.errors`` (its folder then has no complete trajectory).
        ``admit_until`` (Unix seconds): a job whose turn comes later is not started (``stats.not_admitted``; its
        folder stays empty).
        """
        from cuda_agent.harness.evaluation.scheduling import EpisodeUsage, ScheduledBackend
        from cuda_agent.loop import run_episode
        from cuda_agent.training.rollout.token_policy import EngineTokenPolicy

        engine = self.engine(model_dir, refresh)
        pool = self.pool()
        stats = CollectionStats(episodes=len(jobs))
        cfg = self.run_config.model_copy(deep=True)
        cfg.policy = f"hf:{model_dir}"
        if max_turns is not None:
            cfg.agent.max_turns = max_turns
        with self._lock:
            self._live = min(len(jobs), max(1, self.settings.concurrency))  # episodes in flight (a full batch)

        done = [0]
        t0 = time.monotonic()

        admitted = [0]

        def live_now() -> int:  # episodes generating or in tools now, or about to start (self._lock held)
            running = admitted[0] - done[0] - len(stats.errors)
            if stats.not_admitted:  # admission closed: no episode starts any more
                return running
            return min(len(jobs) - done[0] - len(stats.errors), max(1, self.settings.concurrency))

        def one(job: EpisodeJob) -> None:
            if admit_until is not None and time.time() >= admit_until:
                with self._lock:
                    stats.not_admitted += 1
                    self._live = live_now()
                    if stats.not_admitted == 1:
                        log.info("admission closed", started=admitted[0], of=len(jobs),
                                 elapsed_s=round(time.monotonic() - t0, 1))
                engine.wake()
                return
            with self._lock:
                admitted[0] += 1
            usage = EpisodeUsage()
            slot = pool.acquire()
            policy = EngineTokenPolicy(engine, self._tokenizer, params.model_copy(update={"seed": job.seed}))
            started = time.monotonic()
            try:
                run_episode(job.task, config=cfg, plugin_manager=self.pm, out_dir=job.out_dir, policy=policy,
                            backend=ScheduledBackend(pool, slot, usage))
                waited = _turn_timings(job.out_dir).get("policy_s", 0.0)
                with self._lock:
                    stats.episode_s += time.monotonic() - started
                    stats.policy_s += waited
                    done[0] += 1
                    log.info("episode ended", done=done[0], of=len(jobs), seconds=round(time.monotonic() - started, 1),
                             policy_s=round(waited, 1), elapsed_s=round(time.monotonic() - t0, 1))
            except Exception as exc:  # one broken episode must not stop the step; the caller sees it missing
                log.error("episode failed", out=str(job.out_dir), error=f"{type(exc).__name__}: {exc}")
                with self._lock:
                    stats.errors.append(f"{job.out_dir.name}: {type(exc).__name__}: {exc}")
            finally:
                pool.release(slot)
                with self._lock:
                    self._live = live_now()
                    stats.build_s += usage.build_s
                    stats.gpu_busy_s += usage.gpu_busy_s
                    stats.gpu_wait_s += usage.gpu_wait_s
                _write_usage(job.out_dir, usage, time.monotonic() - started)
                engine.wake()

        stop = threading.Event()

        def heartbeat() -> None:  # a run cut by a deadline still leaves where its time went in the log
            while not stop.wait(HEARTBEAT_S):
                slots = [sl.as_dict() for sl in pool.slots]
                log.info("rollouts progress", done=done[0], of=len(jobs), live=self._live,
                         elapsed_s=round(time.monotonic() - t0, 1), load_1min=round(os.getloadavg()[0], 1),
                         cpus=os.cpu_count(),
                         device_busy_s=round(sum(x["busy_s"] for x in slots), 1),
                         device_wait_s=round(sum(x["wait_s"] for x in slots), 1),
                         device_calls=sum(x["calls"] for x in slots),
                         device_phases={f"{sl.index}": sl.top_phases() for sl in pool.slots},
                         **_generation_counters(engine))

        beat = threading.Thread(target=heartbeat, name="rollouts-heartbeat", daemon=True)
        beat.start()
        try:
            with ThreadPoolExecutor(max_workers=max(1, self.settings.concurrency), thread_name_prefix="rollout") as ex:
                list(ex.map(one, jobs))
        finally:
            stop.set()
        stats.wall_s = time.monotonic() - t0
        return stats


#: Seconds between two "rollouts progress" log lines of a running collection.
HEARTBEAT_S = 30.0


def _generation_counters(engine: Any) -> dict[str, float]:
    """The batching engine's counters (batches, rows, seconds generating), rounded for a log line."""
    stats = getattr(engine, "stats", None)
    return {k: round(v, 1) for k, v in stats.as_dict().items()} if stats is not None else {}


def _write_usage(out_dir: Path, usage: Any, wall_s: float) -> None:
    """``usage.json`` in the episode folder: its build seconds (and the wait for a build slot), the wait for its
    task's warm-up, device seconds (held, and waited for), the device steps' evaluator sub-phases, and its runners'
    starts (spawn-to-ready seconds, CPU seconds, and wall and CPU seconds per phase of each start)."""
    import json

    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / "usage.json").write_text(json.dumps({
            "build_s": round(usage.build_s, 3), "build_wait_s": round(usage.build_wait_s, 3),
            "warm_wait_s": round(usage.warm_wait_s, 3), "device_busy_s": round(usage.gpu_busy_s, 3),
            "device_wait_s": round(usage.gpu_wait_s, 3), "wall_s": round(wall_s, 3),
            "device_phase_s": {k: round(v, 3) for k, v in sorted(usage.device_phase_s.items())},
            "runner_start_s": [round(x, 2) for x in usage.runner_start_s],
            "runner_start_cpu_s": [round(x, 2) for x in usage.runner_start_cpu_s],
            "runner_start_phases": [{k: {"wall_s": round(v.wall_s, 3), "cpu_s": round(v.cpu_s, 3)}
                                     for k, v in phases.items()} for phases in usage.runner_start_phases]}))
    except OSError as exc:  # diagnostics only: never fail an episode over it
        log.warning("usage not written", out=str(out_dir), error=str(exc))


def _turn_timings(out_dir: Path) -> dict[str, float]:
    """Summed per-turn timings of an episode's trajectory (``tools_s``, ``policy_s``...)."""
    import json

    sums: dict[str, float] = {}
    path = out_dir / "trajectory.jsonl"
    if not path.exists():
        return sums
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue
        for k, v in (rec.get("timings") or {}).items():
            if isinstance(v, (int, float)):
                sums[k] = sums.get(k, 0.0) + float(v)
    return sums
