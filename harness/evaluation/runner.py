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
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from cuda_agent.errors import ConfigError
from cuda_agent.harness.evaluation.config import EvalConfig
from cuda_agent.harness.evaluation.hidden import hidden_check
from cuda_agent.harness.evaluation.records import (
    EVAL_RECORD_FILE,
    TRAJECTORY_FILE,
    EvalRecord,
    HiddenCheck,
    write_json_atomic,
)
from cuda_agent.harness.evaluation.resume import (
    check_or_save_config,
    clear_partial,
    episode_name,
    is_done,
    save_tasks,
    saved_tasks,
)
from cuda_agent.harness.evaluation.scheduling import DevicePool, EpisodeUsage, ScheduledBackend
from cuda_agent.harness.evaluation.selection import candidate_events, select
from cuda_agent.plugin_manager import PluginManager
from cuda_agent.schemas.result import CandidateResult, Status
from cuda_agent.schemas.task import TaskManifest
from cuda_agent.schemas.trajectory import EndRecord, load_trajectory
from cuda_agent.specs import parse_tasks_spec

log = structlog.get_logger(__name__)

EpisodeFn = Callable[..., EndRecord]


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
    session: dict[str, Any] = field(default_factory=dict)


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


def list_tasks(config: EvalConfig, pm: PluginManager) -> list[TaskManifest]:
    """The tasks of ``eval.tasks`` from its data source (unprobed), cut to ``eval.limit``."""
    if not config.eval.tasks:
        raise ConfigError("no tasks given: pass --tasks SPEC (e.g. folder:examples/tasks) or set eval.tasks")
    spec = parse_tasks_spec(config.eval.tasks, set(pm.registry.names("data_source")))
    block = {**config.plugins.get(spec.name, {}), **spec.config()}
    source = pm.registry.build("data_source", spec.name, block, where="eval.tasks")
    tasks = list(source.iter_tasks())
    if config.eval.limit is not None:
        tasks = tasks[: config.eval.limit]
    if not tasks:
        raise ConfigError(f"task source {config.eval.tasks!r} yielded no tasks")
    ids = [t.id for t in tasks]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        raise ConfigError(f"task source {config.eval.tasks!r} yields duplicate ids: {', '.join(dupes)}")
    return tasks


def probe_task(task: TaskManifest, backend: str) -> TaskManifest:
    """Fill shapes, dtypes and domains with the harness probe; a failing probe is recorded in ``meta['probe_error']``."""
    try:
        from cuda_agent.harness.tasks import load_task_code
    except ImportError:
        log.warning("cuda_agent.harness.tasks is not available; tasks run unprobed", task=task.id)
        return task
    params = inspect.signature(load_task_code).parameters
    kwargs: dict[str, Any] = {"source": task.source, "level": task.level}
    for key in ("kind", "backend"):
        if key in params:
            kwargs[key] = backend
    kwargs = {k: v for k, v in kwargs.items() if k in params}
    try:
        probed = load_task_code(task.code, task.id, **kwargs)
    except Exception as exc:  # one broken task must not stop an evaluation of hundreds
        log.error("task probe failed", task=task.id, error=str(exc))
        return task.model_copy(update={"meta": {**task.meta, "probe_error": f"{type(exc).__name__}: {exc}"}})
    return probed.model_copy(update={"meta": {**task.meta, **probed.meta}, "name": task.name})


def _snapshot_store(episode_dir: Path) -> Path:
    """Where the episode's workspace snapshots are (the loop's default ``<workspace>/../.snapshots``)."""
    default = episode_dir / ".snapshots"
    if default.is_dir():
        return default
    for manifests in episode_dir.rglob("manifests"):
        if manifests.is_dir():
            return manifests.parent
    return default


class EvalRunner:
    """Runs every (task, seed) episode of an eval config into ``out_dir``, resumably.

    :param episode_fn: the episode function (default :func:`cuda_agent.loop.run_episode`);
        an embedding application (e.g. RL rollouts) may pass its own with the same signature.
    """

    def __init__(
        self,
        config: EvalConfig,
        out_dir: Path,
        *,
        plugin_manager: PluginManager | None = None,
        episode_fn: EpisodeFn | None = None,
    ) -> None:
        self.config = config
        self.out_dir = Path(out_dir)
        self.pm = plugin_manager or PluginManager(disable=config.disable)
        if episode_fn is None:
            from cuda_agent.loop import run_episode

            episode_fn = run_episode
        self.episode_fn = episode_fn
        self._lock = threading.Lock()
        self._in_flight = 0
        self._max_in_flight = 0
        self._intervals: list[tuple[float, float]] = []

    # -- planning ------------------------------------------------------------------
    def prepare_tasks(self) -> list[TaskManifest]:
        """Tasks of this run: the saved manifests on resume, else listed and probed now (then saved)."""
        listed = list_tasks(self.config, self.pm)
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
        """Run every unfinished episode; write this session's record; return what happened."""
        resuming = check_or_save_config(self.out_dir, self.config)
        tasks = self.prepare_tasks()
        plans = self.plan(tasks)
        episodes_dir = self.out_dir / "episodes"
        episodes_dir.mkdir(exist_ok=True)
        retry = self.config.eval.retry_errors
        todo = [p for p in plans if not is_done(episodes_dir / p.name, retry)]
        outcome = RunOutcome(self.out_dir, planned=len(plans), already_done=len(plans) - len(todo))
        log.info("eval planned", out=str(self.out_dir), episodes=len(plans), done=outcome.already_done,
                 resuming=resuming, tasks=len(tasks), seeds=self.config.eval.seeds)
        if not todo:
            return outcome
        session_start = time.time()
        pool = DevicePool(self.make_backends(), self.config.eval.build_workers)
        columns = (TextColumn("[bold]eval"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[status]}"),
                   TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn())
        try:
            with Progress(*columns, disable=not self.config.eval.progress, transient=False) as progress, \
                    ThreadPoolExecutor(max_workers=self.config.eval.concurrency, thread_name_prefix="episode") as ex:
                bar = progress.add_task("eval", total=len(plans), completed=outcome.already_done, status="")
                futures = {ex.submit(self.run_one, plan, pool): plan for plan in todo}
                for fut in as_completed(futures):
                    record = fut.result()
                    outcome.ran += 1
                    outcome.runner_errors += record.runner_error is not None
                    progress.update(bar, advance=1, status=f"{futures[fut].name}: {self._status_of(record)}")
        finally:
            pool.close()
            outcome.session = self._write_session(session_start, pool, outcome)
        return outcome

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
        overlap, peak = interval_overlap(self._intervals)
        data = {
            "session": n,
            "started_at": started,
            "ended_at": ended,
            "wall_s": ended - started,
            "episodes_run": outcome.ran,
            "runner_errors": outcome.runner_errors,
            "max_in_flight": self._max_in_flight,
            "overlap_s": overlap,
            "max_overlapping": peak,
            "devices": [s.as_dict() for s in pool.slots],
            "concurrency": self.config.eval.concurrency,
            "build_workers": self.config.eval.build_workers,
        }
        write_json_atomic(sessions / f"{n:04d}.json", data)
        return data

    def run_one(self, plan: EpisodePlan, pool: DevicePool) -> EvalRecord:
        """Run, regrade and hidden-check one episode; write its eval.json last. Never raises."""
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
            if "probe_error" in plan.task.meta:
                raise RuntimeError(f"task probe failed: {plan.task.meta['probe_error']}")
            end = self.episode_fn(plan.task, config=self.config.run_config(plan.seed_index, plan.task), plugin_manager=self.pm,
                                  out_dir=ep_dir, backend=backend)
            if self.config.eval.regrade:
                record.regrades = self.regrade(plan.task, ep_dir, end, backend)
            if self.config.eval.hidden:
                record.hidden = self.hidden(plan.task, ep_dir, record.regrades, backend)
        except Exception as exc:  # an episode's failure is recorded, the evaluation goes on
            record.runner_error = f"{type(exc).__name__}: {exc}\n" + "".join(traceback.format_exc(limit=6))[-3000:]
            log.error("episode failed", episode=plan.name, error=f"{type(exc).__name__}: {exc}")
        finally:
            pool.release(slot)
        record.ended_at = time.time()
        record.gpu_busy_s, record.gpu_wait_s, record.build_s = usage.gpu_busy_s, usage.gpu_wait_s, usage.build_s
        with self._lock:
            self._in_flight -= 1
            self._intervals.append((record.started_at, record.ended_at))
        ep_dir.mkdir(parents=True, exist_ok=True)
        write_json_atomic(ep_dir / EVAL_RECORD_FILE, record.model_dump(mode="json", by_alias=True))
        return record

    # -- trusted passes over the selected candidates -------------------------------------
    def _restore(self, ep_dir: Path, snapshot_id: str, dest_name: str) -> Any:
        from cuda_agent.harness.workspace import ConfinedWorkspace

        dest = ep_dir / dest_name
        n = 1
        while dest.exists():
            n += 1
            dest = ep_dir / f"{dest_name}-{n}"
        return ConfinedWorkspace.restore(snapshot_id, _snapshot_store(ep_dir), dest)

    def regrade(self, task: TaskManifest, ep_dir: Path, end: EndRecord, backend: Any) -> dict[str, CandidateResult]:
        """Trusted grading of each selection mode's candidate; one grading per distinct snapshot.

        The loop's own graded result is reused for the snapshot it graded.
        """
        traj = load_trajectory(ep_dir / TRAJECTORY_FILE)
        events = candidate_events(traj.turns)
        finals = [(t.turn, t.snapshot_id) for t in traj.turns if t.snapshot_id]
        by_snapshot: dict[str, CandidateResult] = {}
        if end.graded is not None and end.selected_snapshot_id:
            by_snapshot[end.selected_snapshot_id] = end.graded
        out: dict[str, CandidateResult] = {}
        for mode in self.config.eval.selections:
            chosen = select(mode, events, finals)
            if chosen is None:
                continue
            if chosen.snapshot_id not in by_snapshot:
                try:
                    ws = self._restore(ep_dir, chosen.snapshot_id, f"regrade-{mode}")
                    result = backend.grade(ws, task)
                except Exception as exc:  # grading must always yield a record
                    result = CandidateResult(task_id=task.id, phase="grade", status=Status.error,
                                             message=f"regrading failed: {type(exc).__name__}: {exc}")
                if result.snapshot_id is None:
                    result = result.model_copy(update={"snapshot_id": chosen.snapshot_id})
                by_snapshot[chosen.snapshot_id] = result
            out[mode] = by_snapshot[chosen.snapshot_id]
        return out

    def hidden(self, task: TaskManifest, ep_dir: Path, regrades: dict[str, CandidateResult], backend: Any) -> dict[str, HiddenCheck]:
        """Hidden re-verification of each ``eval.hidden_modes`` candidate the regrading found correct."""
        traj = load_trajectory(ep_dir / TRAJECTORY_FILE)
        seeds = {s for e in candidate_events(traj.turns) for s in e.seeds}
        done: dict[str, HiddenCheck] = {}
        out: dict[str, HiddenCheck] = {}
        for mode in self.config.eval.hidden_modes:
            graded = regrades.get(mode)
            if graded is None or not graded.passed or not graded.snapshot_id:
                continue
            snap = graded.snapshot_id
            if snap not in done:
                try:
                    ws = self._restore(ep_dir, snap, f"hidden-{mode}")
                    done[snap] = hidden_check(backend, ws, task, trajectory_seeds=seeds, factor=self.config.eval.widen_factor)
                except Exception as exc:
                    done[snap] = HiddenCheck(note=f"hidden checks failed to run: {type(exc).__name__}: {exc}")
            out[mode] = done[snap]
        return out


def run_eval(config: EvalConfig, out_dir: Path, **kwargs: Any) -> RunOutcome:
    """Convenience: ``EvalRunner(config, out_dir, **kwargs).run()``."""
    return EvalRunner(config, out_dir, **kwargs).run()

