"""``cuda-agent tasks check``: the self-check of a whole task suite.

Each task's own ``Model`` is graded as the candidate, through the same sandboxed runner, trusted comparison and
interleaved timing as any solution (:meth:`~cuda_agent.harness.evaluator.Evaluator.self_check`); only the integrity
rules that forbid PyTorch compute in the candidate are off, and every row says so. What it shows:

- whether the harness can run the task at all on this machine (memory, probe, timeouts): the status and reason;
- the task's footprint: bytes per input set, how many sets each process held, the device memory reserved;
- the self-speedup vs eager, which must be about 1.0: the candidate's times come from the runner's own timed calls
  and the baseline's from the reference process's, in alternating rounds; a task far from 1.0 points at a timing or
  data-path difference between the two processes, on real work. The raw samples of both are kept;
- the eager/compile ratio (reported, not targeted).

It runs tasks concurrently where that cannot disturb a measurement: probes, reference processes and torch.compile
warm-ups overlap; the graded parts overlap only as eval's device steps do (``eval.device_steps``, default 1: one at
a time; more overlaps their untimed work while every timed batch takes the device's lock exclusively), their input
sets sized by the device's memory budget; resumes from ``rows.jsonl`` (one line per finished task: the whole resume state, a few KiB per task),
shows a progress bar, and writes ``report.json``, ``report.md`` and ``self_speedup.png``. A self-check is not a
grade: nothing here is a reward.
"""

from __future__ import annotations

import contextlib
import json
import math
import statistics
import threading
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any

import structlog
from pydantic import BaseModel, Field

from cuda_agent.harness.evaluation.config import EvalConfig
from cuda_agent.harness.evaluation.preflight import check_backend_usable, list_tasks, probe_task
from cuda_agent.plugin_manager import PluginManager
from cuda_agent.schemas.result import CandidateResult, Status
from cuda_agent.schemas.task import TaskManifest

log = structlog.get_logger(__name__)

#: A self-speedup vs eager inside this band is "about 1.0" (the issue's +-5% band per task).
BAND = 0.05
ROWS = "rows.jsonl"
#: What every row says about the integrity rules, so no one mistakes a self-check for a grade.
INTEGRITY_NOTE = ("self-check: the task's own Model ran as the candidate; the rules against PyTorch compute "
                  "(T1 static, binary and runtime op audit, T3 aliasing) were skipped, every other check applied")

#: What a row says when its graded pass needed the device alone (a second run of the task may not).
EXCLUSIVE_NOTE = ("ran out of memory beside other work and ran again holding the device alone (the harness's own "
                  "out-of-memory error, not the task's)")


class CheckRow(BaseModel):
    """One task of a self-check."""

    task_id: str = Field(description="TaskManifest.id.")
    level: int | None = Field(None, description="KernelBench level, when known.")
    status: str = Field(description="The self-check's status: a CandidateResult status, or 'too_large'.")
    reason: str = Field("", description="Why, when the status is not 'correct'.")
    bytes_per_set: int | None = Field(None, description="Inputs plus outputs of one input set.")
    reference_sets: int | None = Field(None, description="Input sets the reference process held at once.")
    runner_sets: int | None = Field(None, description="Input sets the runner held at once.")
    reserved_bytes: int | None = Field(None, description="Device memory the session reserved in the budget.")
    peak_bytes: int | None = Field(None, description="Peak device memory of the reference process and runner together.")
    phase_s: dict[str, float] = Field(default_factory=dict, description="Seconds per evaluator phase.")
    call_work_s: dict[str, float] = Field(
        default_factory=dict, description="Where phase_s['forward_calls'] went (Diagnostics.call_work_s): the "
        "runner's copy, poison, timed take, output and input fingerprints, and the round trip.")
    seconds: float = Field(0.0, description="Wall seconds of this task (probe included).")
    stage_s: dict[str, float] = Field(
        default_factory=dict, description="Where 'seconds' went: 'probe' (sizing the task in a child process), 'warm' "
        "(reference process and torch.compile, beside other tasks), 'device_wait' (for the device, which one task "
        "holds at a time) and 'device' (the self-check holding it: summed over tasks, the suite's critical path).")
    speedup_eager: float | None = Field(None, description="Eager median / candidate median (should be ~1.0).")
    speedup_compile: float | None = Field(None, description="torch.compile median / candidate median.")
    eager_over_compile: float | None = Field(None, description="Eager median / compile median (reported only).")
    samples_ms: dict[str, list[float]] = Field(
        default_factory=dict, description="Raw per-call times: 'candidate' (the runner's), 'eager', 'compile'.")
    exclusive_retry: bool = Field(
        False, description="The graded pass ran again holding the device alone after an out-of-memory error of the "
        "harness's own beside other work (MemoryInfo.exclusive_retry).")
    fresh_sets: dict[str, Any] | None = Field(
        None, description="The fresh-set rule's look at this task's graded pass (FreshSetsInfo): the task's own "
        "Model has no cache, so a gap here ('reported': 'fresh') is a false penalty of the harness to explain.")
    flags: list[str] = Field(default_factory=list, description="The graded result's flags (e.g. fresh_inputs_slower).")
    baseline_alloc_retries: dict[str, int] = Field(
        default_factory=dict, description="Per baseline kind, the reference's caching-allocator retries during its "
        "timed batches (Diagnostics.baseline_host; CUDA): above 0, the baseline was timed short of device memory and "
        "reads slower than it runs with room, so the self-speedup reads too high.")
    baseline_prepare: dict[str, float] = Field(
        default_factory=dict, description="The compile baseline's preparation inside the graded pass "
        "(Diagnostics.baseline_host): 'seconds' and 'compiles' (TorchDynamo frames compiled then; above 0 after the "
        "warm-up compiled is a recompile on the suite's critical path), 'cold' (1: the process had compiled nothing "
        "before, it was started after the warm-up: a first compile, no recompile) and 'guard_failures' (the guards "
        "that failed behind a recompile; the reference's stderr names them).")
    alone: dict[str, Any] | None = Field(
        None, description="With --recheck-outliers, a task outside the band checked once more after the suite, "
        "alone on the device (nothing else probing, warming or grading): 'speedup_eager', 'speedup_compile', the "
        "medians ('candidate_ms', 'eager_ms', 'compile_ms'), 'baseline_alloc_retries', 'baseline_prepare', 'status' "
        "and 'seconds'. Back in the band alone points at the concurrent run (memory, other work); still out "
        "points at the task or the harness's data path.")
    device_lock: dict[str, float] = Field(
        default_factory=dict, description="The graded pass's use of the device's timing lock (Diagnostics."
        "device_lock): 'exclusive_s' (its timed batches alone on the device: summed over tasks, the floor of the "
        "suite's time under any device_steps), 'exclusive_wait_s', 'exclusive_takes', 'shared_wait_s'.")
    baseline_host: dict[str, dict[str, float]] = Field(
        default_factory=dict, description="Per baseline kind, the reference's timed calls (Diagnostics."
        "baseline_host): 'calls', 'over_spin' (the host's enqueue outlasted the pre-roll spin), 'retakes' (calls "
        "taken again behind a longer spin: each one runs the model again inside the device's exclusive hold), "
        "'spin_blocked' (calls timed behind the base spin: their host waits for the device) and 'max_enqueue_ms'.")
    candidate_host: dict[str, float] = Field(
        default_factory=dict, description="The candidate's timed calls (Diagnostics.candidate_host): 'calls', "
        "'over_spin', 'spin_blocked', 'max_enqueue_ms'; a self-check's blocked model shows 'spin_blocked' on "
        "both sides.")
    device: str | None = Field(
        None, description="The device the graded pass ran on (Provenance.device, e.g. 'NVIDIA H100 80GB HBM3'): a "
        "suite resumed on another machine mixes rows of several, and the report counts them.")
    started_at: float | None = Field(
        None, description="Unix time this task's check started (probe included): with 'seconds', the rows of one "
        "run lay out its timeline (how many tasks were on the host and the device at once).")
    grade_rounds: dict[str, Any] = Field(
        default_factory=dict, description="The graded pass's rounds (Diagnostics, interfaces 3.7): 'run', 'max', "
        "'stop' (grade_stop_reason) and 'calls' (per variant, each round's timed calls: the split of samples_ms into "
        "rounds, for benchmarks/grading_stop_replay.py).")
    device_steps: int | None = Field(
        None, description="eval.device_steps of the run that checked this task: graded parts on the device at once "
        "(1: their 'device' seconds add up to the suite's critical path; more: they overlap).")
    note: str = Field(INTEGRITY_NOTE, description="What this row is (never a grade).")


#: The baseline's timed-call counts a row keeps (:attr:`CheckRow.baseline_host`).
HOST_KEYS = ("calls", "over_spin", "retakes", "spin_blocked", "max_enqueue_ms")


def row_from_result(task: TaskManifest, result: CandidateResult, seconds: float) -> CheckRow:
    """A row from a self-check's result."""
    d = result.diagnostics
    mem = getattr(d, "memory", None)
    row = CheckRow(task_id=task.id, level=task.level, status=result.status.value, seconds=round(seconds, 3),
                   reason="" if result.status is Status.correct else result.message[:2000],
                   phase_s=dict(d.phase_s), speedup_eager=result.speedup_eager, speedup_compile=result.speedup_compile,
                   call_work_s={k: round(v, 4) for k, v in d.call_work_s.items()},
                   baseline_alloc_retries={k: int(v["alloc_retries"]) for k, v in d.baseline_host.items()
                                           if "alloc_retries" in v})
    row.device = (result.provenance.device or None) if result.provenance is not None else None
    row.device_lock = {k: round(v, 3) for k, v in d.device_lock.items()}
    if d.grade_rounds_run is not None:
        row.grade_rounds = {"run": d.grade_rounds_run, "max": d.grade_rounds, "stop": d.grade_stop_reason,
                            "calls": dict(d.grade_round_calls)}
    row.baseline_host = {kind: {k: round(float(v[k]), 3) for k in HOST_KEYS if k in v}
                         for kind, v in d.baseline_host.items()}
    row.candidate_host = {k: round(float(v), 3) for k, v in d.candidate_host.items()}
    compiled = d.baseline_host.get("compile", {})
    if "prepare_s" in compiled:
        row.baseline_prepare = {"seconds": round(compiled["prepare_s"], 3),
                                "compiles": int(compiled.get("prepare_compiles", 0)),
                                **{k: int(compiled[f"prepare_{k}"]) for k in ("cold", "guard_failures")
                                   if f"prepare_{k}" in compiled}}
    if mem is not None:
        row.bytes_per_set = mem.bytes_per_set
        row.reference_sets = mem.reference_sets
        row.runner_sets = mem.runner_sets
        row.reserved_bytes = mem.reserved_bytes
        row.peak_bytes = mem.peak_bytes
        if mem.exclusive_retry:
            row.exclusive_retry = True
            row.note = f"{EXCLUSIVE_NOTE}; {row.note}"
    if d.fresh_sets is not None:
        row.fresh_sets = d.fresh_sets.model_dump(mode="json")
    row.flags = list(result.flags)
    if result.timing is not None:
        row.samples_ms["candidate"] = list(result.timing.raw_ms)
    b = result.baselines
    if b is not None:
        if b.eager is not None:
            row.samples_ms["eager"] = list(b.eager.raw_ms)
        if b.compile is not None:
            row.samples_ms["compile"] = list(b.compile.raw_ms)
        if b.eager is not None and b.compile is not None and b.compile.median_ms > 0:
            row.eager_over_compile = b.eager.median_ms / b.compile.median_ms
    return row


def row_from_probe_error(task: TaskManifest, seconds: float) -> CheckRow:
    """A row for a task whose probe failed (too large for this machine, or a broken task)."""
    error = str(task.meta.get("probe_error", ""))
    status = "too_large" if "[too_large]" in error else "error"
    return CheckRow(task_id=task.id, level=task.level, status=status, reason=error[:2000], seconds=round(seconds, 3))


def done_rows(out_dir: Path) -> dict[str, CheckRow]:
    """Rows already written (the resume state); a torn last line (a kill mid-write) is ignored."""
    path = out_dir / ROWS
    rows: dict[str, CheckRow] = {}
    if not path.is_file():
        return rows
    for line in path.read_text().splitlines():
        try:
            row = CheckRow.model_validate_json(line)
        except ValueError:
            continue
        rows[row.task_id] = row
    return rows


class SuiteCheck:
    """Runs the self-check of every task of ``config.eval.tasks`` into ``out_dir``, resumably."""

    def __init__(self, config: EvalConfig, out_dir: Path, pm: PluginManager,
                 stop: threading.Event | None = None, retry: bool = False,
                 shard: tuple[int, int] | None = None, report_only: bool = False,
                 recheck_outliers: bool = False, recheck_band: float = BAND, retry_too_large: bool = False,
                 redo: list[str] | None = None) -> None:
        """``shard=(k, n)``: check only the plan's tasks at positions ``k, k+n, k+2n...`` (one of ``n`` machines or
        GPUs sharing the suite; the plan, and so the resume state, is the whole suite's, so the shards' rows
        joined in one folder resume and report as one run). ``report_only``: check nothing, write the report of
        the rows the folder holds (no device needed). ``recheck_outliers``: after the suite, every correct task
        whose self-speedup is more than ``recheck_band`` from 1.0 and has no ``alone`` look yet is checked again by
        itself (see :attr:`CheckRow.alone`); its row keeps the suite's figures and gains the alone ones.
        ``retry`` / ``retry_too_large``: tasks whose row ended in error or timeout / as too large are checked again;
        ``redo``: so is every task whose id contains one of these strings (a new row replaces the old one)."""
        if shard is not None and not (shard[1] >= 1 and 0 <= shard[0] < shard[1]):
            from cuda_agent.errors import ConfigError

            raise ConfigError(f"shard {shard[0]}/{shard[1]}: want K/N with 0 <= K < N")
        self.config = config
        self.out_dir = Path(out_dir)
        self.pm = pm
        self.stop = stop or threading.Event()
        self.retry = retry
        self.retry_too_large = retry_too_large
        self.redo = [r for r in (redo or []) if r]
        self.shard = shard
        self.report_only = report_only
        self.recheck_outliers = recheck_outliers
        self.recheck_band = recheck_band
        self._write_lock = threading.Lock()
        from cuda_agent.harness.evaluation.scheduling import StepGate

        #: The graded parts on the device at once (``eval.device_steps``, as eval's device steps): each holds the
        #: device's machine lock in the shared mode and its timed batches take it exclusively, so a timed call is
        #: alone on the device whatever this is; more than 1 overlaps the untimed parts (set making, checks).
        self._device = StepGate(config.eval.device_steps)

    def run(self) -> dict[str, Any]:
        """Check every unfinished task; returns the report (also written to ``out_dir``)."""
        tasks = list_tasks(self.config, self.pm)
        if not self.report_only:
            check_backend_usable(self.config, self.pm)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self._check_resume(tasks)
        if self.shard is not None:
            k, n = self.shard
            tasks = tasks[k::n]
        rows = done_rows(self.out_dir)
        if not self.report_only:
            rows = {k: r for k, r in rows.items() if not self._checks_again(r)}
        todo = [] if self.report_only else interleave_levels([t for t in tasks if t.id not in rows])
        log.info("tasks check planned", tasks=len(tasks), done=sum(1 for t in tasks if t.id in rows),
                 shard=f"{self.shard[0]}/{self.shard[1]}" if self.shard else None, report_only=self.report_only,
                 out=str(self.out_dir))
        def outliers() -> list[TaskManifest]:
            return [t for t in tasks if t.id in rows and self._needs_alone_look(rows[t.id])]

        if (todo or (self.recheck_outliers and not self.report_only and outliers())) and not self.stop.is_set():
            backend = self.pm.registry.build("backend", self.config.backend,
                                             self.config.plugins.get(self.config.backend), where="backend")
            try:
                if todo:
                    self._run_all(todo, backend, rows, total=len(tasks))
                if self.recheck_outliers:
                    for task in outliers():
                        if self.stop.is_set():
                            break
                        self._recheck_alone(task, backend, rows)
            finally:
                backend.close()
        from cuda_agent.harness.suite_report import write_report

        return write_report(self.out_dir, [rows[t.id] for t in tasks if t.id in rows], planned=len(tasks),
                            backend=self.config.backend, tasks_spec=self.config.eval.tasks or "")

    def _checks_again(self, row: CheckRow) -> bool:
        """Whether this run checks the task of a saved ``row`` again (``retry``, ``retry_too_large``, ``redo``)."""
        return ((self.retry and row.status in ("error", "timeout"))
                or (self.retry_too_large and row.status == "too_large")
                or any(part in row.task_id for part in self.redo))

    def _check_resume(self, tasks: list[TaskManifest]) -> None:
        """The folder's saved plan must be this one (same tasks spec and backend); saved otherwise."""
        plan = {"tasks": self.config.eval.tasks, "backend": self.config.backend, "task_ids": [t.id for t in tasks]}
        path = self.out_dir / "plan.json"
        if path.is_file():
            saved = json.loads(path.read_text())
            if saved != plan:
                from cuda_agent.errors import ConfigError

                raise ConfigError(f"{self.out_dir} holds a self-check of another plan (tasks {saved.get('tasks')!r}, "
                                  f"backend {saved.get('backend')!r}): use another --out, or the same arguments")
        else:
            path.write_text(json.dumps(plan, indent=1))

    def _run_all(self, todo: list[TaskManifest], backend: Any, rows: dict[str, CheckRow], total: int) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        columns = (TextColumn("[bold]tasks check"), BarColumn(), MofNCompleteColumn(),
                   TextColumn("{task.fields[status]}"), TimeElapsedColumn())
        ex = ThreadPoolExecutor(max_workers=self.config.eval.concurrency, thread_name_prefix="check")
        try:
            with Progress(*columns, disable=not self.config.eval.progress, transient=False) as progress:
                bar = progress.add_task("check", total=total, completed=total - len(todo), status="")
                futures: dict[Future, TaskManifest] = {ex.submit(self.check_one, t, backend): t for t in todo}
                pending = set(futures)
                while pending:
                    done, pending = wait(pending, timeout=0.25, return_when=FIRST_COMPLETED)
                    for fut in done:
                        row = fut.result()
                        if row is not None:
                            rows[row.task_id] = row
                            progress.update(bar, advance=1, status=f"{row.task_id}: {row.status}")
                    if self.stop.is_set():
                        for fut in pending:
                            fut.cancel()
        finally:
            ex.shutdown(wait=True, cancel_futures=True)

    def _needs_alone_look(self, row: CheckRow) -> bool:
        """A correct row outside the recheck band with no alone look yet."""
        return (row.status == "correct" and row.alone is None
                and not within_band(row.speedup_eager, self.recheck_band))

    def _recheck_alone(self, task: TaskManifest, backend: Any, rows: dict[str, CheckRow]) -> None:
        """Check ``task`` again with nothing else on the device (the pool has drained); the suite's row gains
        the look (:attr:`CheckRow.alone`) and is written again (the last row of a task is its state)."""
        log.info("tasks check: an outlier checked again alone", task=task.id,
                 self_speedup=rows[task.id].speedup_eager)
        look = self._check(task, backend)
        medians = {k: median_or_none(v) for k, v in look.samples_ms.items()}
        row = rows[task.id].model_copy()
        row.alone = {"status": look.status, "speedup_eager": look.speedup_eager,
                     "speedup_compile": look.speedup_compile,
                     **{f"{k}_ms": (round(v, 4) if v is not None else None) for k, v in medians.items()},
                     "baseline_alloc_retries": dict(look.baseline_alloc_retries),
                     "baseline_prepare": dict(look.baseline_prepare), "seconds": look.seconds,
                     "reason": look.reason[:500]}
        self._write(row)
        rows[task.id] = row

    def _write(self, row: CheckRow) -> None:
        with self._write_lock, (self.out_dir / ROWS).open("a") as fh:
            fh.write(row.model_dump_json() + "\n")

    def check_one(self, task: TaskManifest, backend: Any) -> CheckRow | None:
        """Probe and self-check one task, write its row; None when stopped before it ran."""
        if self.stop.is_set():
            return None
        row = self._check(task, backend)
        self._write(row)
        return row

    def _check(self, task: TaskManifest, backend: Any) -> CheckRow:
        """Probe and self-check one task: its row (not written)."""
        t0 = time.monotonic()
        started_at = time.time()
        stages: dict[str, float] = {}
        lap = t0

        def stage(name: str) -> None:
            nonlocal lap
            now = time.monotonic()
            stages[name] = stages.get(name, 0.0) + now - lap
            # logged as each stage ends: a run killed at its cap still shows where each task's time went
            log.info("self-check stage", task=task.id, stage=name, seconds=round(now - lap, 3))
            lap = now

        log.info("self-check started", task=task.id)
        probed = probe_task(task, self.config.backend)
        stage("probe")
        if "probe_error" in probed.meta:
            row = row_from_probe_error(probed, time.monotonic() - t0)
        else:
            try:
                task_now = backend.task_for(probed)
                warm = getattr(backend, "warm", None)
                if warm is not None:  # reference process and torch.compile now, beside other tasks' device work
                    try:
                        warm(task_now)
                    except Exception as exc:  # noqa: BLE001 - the graded pass compiles in its own reservation
                        log.warning("self-check warm-up failed; the graded pass prepares its baselines itself",
                                    task=task.id, error=str(exc)[:300])
                stage("warm")
                evaluator = backend.evaluator()
                lock = getattr(evaluator, "lock", None)
                with self._device, (lock.shared() if lock is not None else contextlib.nullcontext()):
                    stage("device_wait")
                    try:
                        result = evaluator.self_check(task_now)
                    finally:
                        stage("device")
            except Exception as exc:  # noqa: BLE001 - one task's harness failure is that task's row
                log.error("self-check failed", task=task.id, error=str(exc))
                row = CheckRow(task_id=task.id, level=task.level, status="error",
                               reason=f"harness: {type(exc).__name__}: {exc}"[:2000],
                               seconds=round(time.monotonic() - t0, 3))
            else:
                row = row_from_result(probed, result, time.monotonic() - t0)
        row.stage_s = {k: round(v, 3) for k, v in stages.items()}
        row.device_steps = self.config.eval.device_steps
        row.started_at = round(started_at, 3)
        return row


def interleave_levels(tasks: list[TaskManifest]) -> list[TaskManifest]:
    """``tasks`` in the order they are started: one of each level in turn (level 1, 2, 3, 1, 2, 3, ...; each
    level's own order kept). KernelBench's level 1 is mostly device time (gigabytes per input set) and level 3
    mostly CPU time (torch.compile's warm-up of whole networks, up to 70 s); started level after level, the host's
    cores idle through level 1 and the device through level 3's compiles."""
    by_level: dict[Any, list[TaskManifest]] = {}
    for task in tasks:
        by_level.setdefault(task.level, []).append(task)
    queues = [by_level[level] for level in sorted(by_level, key=lambda lv: (lv is None, lv or 0))]
    out: list[TaskManifest] = []
    for i in range(max((len(q) for q in queues), default=0)):
        out.extend(q[i] for q in queues if i < len(q))
    return out


def within_band(speedup: float | None, band: float = BAND) -> bool:
    """The self-speedup is within ``band`` of 1.0."""
    return speedup is not None and math.isfinite(speedup) and abs(speedup - 1.0) <= band


def median_or_none(values: list[float]) -> float | None:
    """The median, or None for no values."""
    return statistics.median(values) if values else None
