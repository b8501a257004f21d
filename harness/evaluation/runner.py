"""The concurrent, resumable eval runner behind ``cuda-agent eval``.

Many episodes are in flight at once (threads: an API policy mostly waits on
the network); compiles share a CPU build pool; verify/profile/grade calls
queue for their device's timing lock; every device slot has its own backend
(see :mod:`.scheduling`). Each episode runs the agent loop
(:func:`cuda_agent.loop.run_episode`) into ``OUT/episodes/<task>__seed<k>/``,
then every selection mode's candidate is re-graded by the trusted grading
pass and the best one re-verified on hidden inputs (:mod:`.hidden`); the
``eval.json`` written last marks it done (see :mod:`.resume`).
"""

from __future__ import annotations

import inspect
import threading
import time
import traceback
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from cuda_agent.harness.evaluation.config import EvalConfig
from cuda_agent.harness.evaluation.preflight import list_tasks, preflight, probe_task
from cuda_agent.harness.evaluation.records import EVAL_RECORD_FILE, EvalRecord, write_json_atomic
from cuda_agent.harness.evaluation.resume import (
    check_or_save_config,
    clear_partial,
    episode_name,
    errors_in,
    is_done,
    save_tasks,
    saved_tasks,
)
from cuda_agent.harness.evaluation.scheduling import DevicePool, EpisodeUsage, ScheduledBackend
from cuda_agent.harness.evaluation.trusted_passes import TrustedPasses
from cuda_agent.interrupts import GRACE_S, EpisodeInterrupted, StopRequest
from cuda_agent.plugin_manager import PluginManager
from cuda_agent.provenance import plugin_versions
from cuda_agent.schemas.result import CandidateResult, Status
from cuda_agent.schemas.task import TaskManifest
from cuda_agent.schemas.trajectory import EndRecord

__all__ = ["EpisodePlan", "EvalRunner", "RunOutcome", "interval_overlap", "list_tasks", "probe_task", "run_eval"]

log = structlog.get_logger(__name__)

EpisodeFn = Callable[..., EndRecord]
#: Seconds the runner waits, after the grace period, for interrupted episodes to reach a tool boundary.
SETTLE_S = 3.0


@dataclass
class EpisodePlan:
    """One (task, seed) episode to run."""

    task: TaskManifest
    seed_index: int
    name: str


@dataclass
class RunOutcome:
    """What one runner session did."""

    out_dir: Path
    planned: int
    already_done: int
    ran: int = 0
    runner_errors: int = 0
    interrupted: bool = False
    not_done: int = 0
    errors: dict[str, int] = field(default_factory=dict)
    session: dict[str, Any] = field(default_factory=dict)

    @property
    def done(self) -> int:
        """Episodes of the plan finished now or before."""
        return self.already_done + self.ran


def interval_overlap(intervals: list[tuple[float, float]]) -> tuple[float, int]:
    """Seconds during which two or more intervals overlap, and the most overlapping at once."""
    points = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals], key=lambda p: (p[0], p[1]))
    depth, peak, overlap, last = 0, 0, 0.0, None
    for t, step in points:
        if last is not None and depth >= 2:
            overlap += t - last
        depth += step
        peak = max(peak, depth)
        last = t
    return overlap, peak


class EvalRunner:
    """Runs every (task, seed) episode of an eval config into ``out_dir``, resumably.

    :param episode_fn: the episode function (default :func:`cuda_agent.loop.run_episode`);
        an embedding application (e.g. RL rollouts) may pass its own with the same signature
        (a ``stop`` keyword is passed when it takes one).
    :param stop: a stop request (``cuda-agent eval`` passes its Ctrl-C :class:`~cuda_agent.interrupts.StopSignal`):
        once set, queued episodes are cancelled and running ones stop at their next tool call, unrecorded.
    """

    def __init__(
        self,
        config: EvalConfig,
        out_dir: Path,
        *,
        plugin_manager: PluginManager | None = None,
        episode_fn: EpisodeFn | None = None,
        stop: StopRequest | None = None,
    ) -> None:
        self.config = config
        self.out_dir = Path(out_dir)
        self.pm = plugin_manager or PluginManager(disable=config.disable)
        if episode_fn is None:
            from cuda_agent.loop import run_episode

            episode_fn = run_episode
        self.episode_fn = episode_fn
        self._passes_stop = "stop" in inspect.signature(episode_fn).parameters
        self.stop: StopRequest = stop if stop is not None else threading.Event()
        self._lock = threading.Lock()
        self._in_flight = 0
        self._max_in_flight = 0
        self._intervals: list[tuple[float, float]] = []

    # -- planning ------------------------------------------------------------------
    def prepare_tasks(self, listed: list[TaskManifest] | None = None) -> list[TaskManifest]:
        """Tasks of this run: the saved manifests on resume, else listed and probed now (then saved)."""
        listed = listed if listed is not None else list_tasks(self.config, self.pm)
        saved = saved_tasks(self.out_dir, listed)
        if saved is not None:
            return saved
        if self.config.eval.probe:
            # each probe is a sandboxed subprocess: run a few at once
            with ThreadPoolExecutor(max_workers=self.config.eval.build_workers, thread_name_prefix="probe") as ex:
                prepared = list(ex.map(lambda t: probe_task(t, self.config.backend), listed))
        else:
            prepared = listed
        save_tasks(self.out_dir, listed, prepared)
        return prepared

    def plan(self, tasks: list[TaskManifest]) -> list[EpisodePlan]:
        """Every (task, seed index) episode, task-major."""
        return [EpisodePlan(t, k, episode_name(t.id, k)) for t in tasks for k in range(self.config.eval.seeds)]

    def device_indices(self) -> list[int]:
        """``eval.devices``, else every visible GPU for 'cuda', else one slot."""
        if self.config.eval.devices:
            return list(self.config.eval.devices)
        if self.config.backend == "cuda":
            import torch

            return list(range(max(1, torch.cuda.device_count())))
        return [0]

    def make_backends(self) -> dict[int, Any]:
        """One backend per device slot; a backend config with a ``device_index`` field gets the slot's index."""
        name = self.config.backend
        entry = self.pm.registry.get("backend", name, where="backend")
        backends = {}
        for index in self.device_indices():
            block = dict(self.config.plugins.get(name, {}))
            if entry.config_model is not None and "device_index" in entry.config_model.model_fields:
                block["device_index"] = index
            backends[index] = entry.build(block)
        return backends

    # -- running -------------------------------------------------------------------
    def run(self) -> RunOutcome:
        """Run every unfinished episode; write this session's record; return what happened.

        Nothing is written before :func:`~.preflight.preflight` has accepted the config, the tasks and the backend.
        """
        listed = preflight(self.config, self.pm)
        resuming = check_or_save_config(self.out_dir, self.config, plugin_versions(p.as_dict() for p in self.pm.plugins()))
        plans = self.plan(self.prepare_tasks(listed))
        episodes_dir = self.out_dir / "episodes"
        episodes_dir.mkdir(exist_ok=True)
        retry = self.config.eval.retry_errors
        todo = [p for p in plans if not is_done(episodes_dir / p.name, retry)]
        outcome = RunOutcome(self.out_dir, planned=len(plans), already_done=len(plans) - len(todo))
        log.info("eval planned", out=str(self.out_dir), episodes=len(plans), done=outcome.already_done,
                 resuming=resuming, seeds=self.config.eval.seeds)
        if todo and not self.stop.is_set():
            session_start = time.time()
            pool = DevicePool(self.make_backends(), self.config.eval.build_workers, self.config.eval.device_steps)
            try:
                self._run_all(todo, pool, outcome)
            finally:
                pool.close()
                outcome.session = self._write_session(session_start, pool, outcome)
        outcome.interrupted = self.stop.is_set()
        outcome.not_done = outcome.planned - outcome.done
        outcome.errors = errors_in(self.out_dir)
        return outcome

    def _run_all(self, todo: list[EpisodePlan], pool: DevicePool, outcome: RunOutcome) -> None:
        """Run ``todo`` on worker threads; on a stop, cancel the queue and give running episodes a deadline."""
        columns = (TextColumn("[bold]eval"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[status]}"),
                   TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn())
        ex = ThreadPoolExecutor(max_workers=self.config.eval.concurrency, thread_name_prefix="episode")
        try:
            with Progress(*columns, disable=not self.config.eval.progress, transient=False) as progress:
                bar = progress.add_task("eval", total=outcome.planned, completed=outcome.already_done, status="")
                futures: dict[Future, EpisodePlan] = {ex.submit(self.run_one, plan, pool): plan for plan in todo}
                pending, deadline = set(futures), None
                while pending:
                    done, pending = wait(pending, timeout=0.25, return_when=FIRST_COMPLETED)
                    for fut in done:
                        record = None if fut.cancelled() else fut.result()
                        if record is None:  # cancelled or interrupted: not done, runs again on resume
                            continue
                        outcome.ran += 1
                        outcome.runner_errors += record.runner_error is not None
                        progress.update(bar, advance=1, status=f"{futures[fut].name}: {self._status_of(record)}")
                    if self.stop.is_set() and deadline is None:
                        for fut in pending:
                            fut.cancel()
                        pending = {f for f in pending if not f.cancelled()}
                        deadline = time.monotonic() + getattr(self.stop, "grace_s", GRACE_S) + SETTLE_S
                        progress.update(bar, status="stopping: queued episodes cancelled")
                    if deadline is not None and time.monotonic() > deadline:
                        break  # episodes stuck in a network call: leave them; they are not recorded
        finally:
            ex.shutdown(wait=False, cancel_futures=True)

    @staticmethod
    def _status_of(record: EvalRecord) -> str:
        if record.runner_error:
            return "runner error"
        graded = record.regrades.get("best") or next(iter(record.regrades.values()), None)
        return graded.status.value if graded else "no candidate"

    def _write_session(self, started: float, pool: DevicePool, outcome: RunOutcome) -> dict[str, Any]:
        sessions = self.out_dir / "sessions"
        sessions.mkdir(exist_ok=True)
        n = len(list(sessions.glob("*.json")))
        ended = time.time()
        with self._lock:
            overlap, peak = interval_overlap(list(self._intervals))
        data = {
            "session": n,
            "started_at": started,
            "ended_at": ended,
            "wall_s": ended - started,
            "episodes_run": outcome.ran,
            "runner_errors": outcome.runner_errors,
            "interrupted": self.stop.is_set(),
            "max_in_flight": self._max_in_flight,
            "overlap_s": overlap,
            "max_overlapping": peak,
            "backend": self.config.backend,
            "devices": [s.as_dict() for s in pool.slots],
            "concurrency": self.config.eval.concurrency,
            "build_workers": self.config.eval.build_workers,
            "device_steps": self.config.eval.device_steps,
        }
        write_json_atomic(sessions / f"{n:04d}.json", data)
        return data

    def run_one(self, plan: EpisodePlan, pool: DevicePool) -> EvalRecord | None:
        """Run, regrade and hidden-check one episode; write its eval.json last. Never raises.

        Returns None, writing nothing, when a stop was requested while it ran: the episode is not done.
        """
        if self.stop.is_set():
            return None
        ep_dir = self.out_dir / "episodes" / plan.name
        clear_partial(ep_dir)
        usage = EpisodeUsage()
        slot = pool.acquire()
        backend = ScheduledBackend(pool, slot, usage)
        started = time.time()
        with self._lock:
            self._in_flight += 1
            self._max_in_flight = max(self._max_in_flight, self._in_flight)
        record = EvalRecord(task_id=plan.task.id, level=plan.task.level, seed_index=plan.seed_index,
                            seed=self.config.seed + plan.seed_index, device=slot.index, started_at=started, ended_at=started)
        try:
            self._episode(plan, ep_dir, backend, record)
        except EpisodeInterrupted:
            pass
        except Exception as exc:  # an episode's failure is recorded, the evaluation goes on
            if not self.stop.is_set():  # a failure caused by a stop (its processes ended) is no verdict
                record.runner_error = f"{type(exc).__name__}: {exc}\n" + "".join(traceback.format_exc(limit=6))[-3000:]
                log.error("episode failed", episode=plan.name, error=f"{type(exc).__name__}: {exc}")
        finally:
            pool.release(slot)
        record.ended_at = time.time()
        record.gpu_busy_s, record.gpu_wait_s, record.build_s = usage.gpu_busy_s, usage.gpu_wait_s, usage.build_s
        with self._lock:
            self._in_flight -= 1
            self._intervals.append((record.started_at, record.ended_at))
        if self.stop.is_set():
            return None
        ep_dir.mkdir(parents=True, exist_ok=True)
        write_json_atomic(ep_dir / EVAL_RECORD_FILE, record.model_dump(mode="json", by_alias=True))
        return record

    def _episode(self, plan: EpisodePlan, ep_dir: Path, backend: Any, record: EvalRecord) -> None:
        """The agent loop, then the trusted passes, filling ``record``."""
        if "probe_error" in plan.task.meta:
            error = str(plan.task.meta["probe_error"])
            if "[too_large]" in error:  # not the policy's doing, nor a harness error: counted on its own
                record.regrades = {mode: CandidateResult(task_id=plan.task.id, phase="grade", status=Status.too_large,
                                                         message=error[:2000])
                                   for mode in self.config.eval.selections}
                return
            raise RuntimeError(f"task probe failed: {error}")
        extra = {"stop": self.stop} if self._passes_stop else {}
        end = self.episode_fn(plan.task, config=self.config.run_config(plan.seed_index, plan.task),
                              plugin_manager=self.pm, out_dir=ep_dir, backend=backend, **extra)
        passes = TrustedPasses(self.config, plan.task, ep_dir, backend, self.stop)
        if self.config.eval.regrade:
            record.regrades = passes.regrade(end)
            if self.config.eval.budget_regrade:
                record.budget = passes.budget()
        if self.config.eval.hidden:
            record.hidden = passes.hidden(record.regrades)


def run_eval(config: EvalConfig, out_dir: Path, **kwargs: Any) -> RunOutcome:
    """Convenience: ``EvalRunner(config, out_dir, **kwargs).run()``."""
    return EvalRunner(config, out_dir, **kwargs).run()

