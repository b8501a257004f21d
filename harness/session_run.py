"""One evaluation from start to verdict: a fresh runner and the task's reference process, a session, a strategy,
the closing checks, and the findings folded into a :class:`~cuda_agent.schemas.CandidateResult`.

Whatever the candidate does (crash, hang, memory blow-up, exception, integrity violation) ends as a status of the
returned result; only a failure of the harness itself (a reference process that cannot run the task) is
``error`` with a message saying so, after one retry holding the device alone when that failure was an
out-of-memory error. Rejections outrank failures, failures outrank wrong outputs.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from cuda_agent.harness.evaluation.scheduling import released_step_places
from cuda_agent.harness.memory_budget import SetPlan, TooLarge
from cuda_agent.harness.messages import Violation
from cuda_agent.harness.reference_sets import ReferenceError_
from cuda_agent.harness.runner_client import CandidateFailed, RunnerClient
from cuda_agent.harness.sandbox import CandidateDied
from cuda_agent.harness.session import Session, SessionContext
from cuda_agent.schemas.result import CandidateResult, CheckError, MemoryInfo, Status
from cuda_agent.schemas.task import TaskManifest

if TYPE_CHECKING:
    from cuda_agent.harness.evaluator import Evaluator

log = structlog.get_logger(__name__)

#: Device bytes still held by a reference process after a session that make it retire.
LEAK_LIMIT_BYTES = 1 << 30
#: What an out-of-memory error of a reference process looks like in its failure (torch's and Python's exceptions,
#: the CUDA allocator's text).
OOM_MARKERS = ("OutOfMemoryError", "CUDA out of memory", "MemoryError")

Strategy = Callable[[Session, CandidateResult], None]


def workspace_digest(root: Path) -> dict[str, str]:
    """rel path -> sha256 of every file (caches excluded): re-hashed after each run (T23)."""
    out: dict[str, str] = {}
    for p in sorted(Path(root).rglob("*")):
        if p.is_file() and "__pycache__" not in p.parts:
            out[str(p.relative_to(root))] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def build_key(task: TaskManifest, digest_of_files: dict[str, str], so_path: Path | None) -> str:
    """Identity of a candidate build: the task, every workspace file (:func:`workspace_digest`), the module's bytes."""
    h = hashlib.sha256(task.code_hash.encode())
    for rel, digest in digest_of_files.items():
        h.update(f"{rel}={digest};".encode())
    if so_path is not None and Path(so_path).is_file():
        h.update(hashlib.sha256(Path(so_path).read_bytes()).digest())
    return h.hexdigest()


def wanted_sets(ctx: SessionContext, task: TaskManifest, n_verify: int, *, timing: bool, phase: str) -> tuple[int, int]:
    """(input sets, fresh sets) a session of ``phase`` uses: the verify sets, the timing sets it rotates over, the
    widened sets of a grading pass; the fresh sets of its timed calls."""
    from cuda_agent.harness.fresh_sets import fresh_count
    from cuda_agent.harness.memory_plan import task_footprint
    from cuda_agent.harness.session import BIG_WORKING_SET, MIN_ROTATION_SETS

    fp = task_footprint(task)
    input_bytes = fp.input_bytes if fp else 0
    sets = n_verify
    if timing:
        sets += ctx.protocol.rotation_sets if input_bytes <= BIG_WORKING_SET else max(0, MIN_ROTATION_SETS - n_verify)
    if phase == "grade":
        sets += ctx.integrity.widened_sets
    fresh = fresh_count(ctx.integrity.fresh_set_calls, input_bytes) if timing else 0
    return sets, fresh


def run_session(evaluator: Evaluator, phase: str, task: TaskManifest, root: Path, so_path: Path | None,
                body: Strategy, *, seeds: list[int] | None = None, before: dict[str, str] | None = None,
                timing: bool = False, torch_compute_allowed: bool = False) -> CandidateResult:
    """One evaluation of ``phase`` (see the module docstring). ``seeds``: the verify sets' seeds (default: fresh
    secret ones); ``before``: the workspace's :func:`workspace_digest` when the caller has it; ``timing``: ``body``
    times calls, so the timing sets are made up front with the verify sets. The session's input sets are sized
    to the device's memory budget first (:mod:`~cuda_agent.harness.memory_plan`); a task that cannot fit even one
    set is ``too_large``. ``torch_compute_allowed``: the suite self-check (never a grade).

    A session that ends in an out-of-memory error of the harness's own (its reference process's, never the
    candidate's) runs once more, a fresh session holding the device alone: the budget admitted it, so other work
    beside it or the allocator's fragmentation took what it needed, and a harness error on a valid task is a false
    result. The result says so (``MemoryInfo.exclusive_retry``)."""
    start = time.monotonic()
    before = before if before is not None else workspace_digest(root)
    attempt = _Attempt()
    result = _session(evaluator, phase, task, root, so_path, body, seeds, before, timing, torch_compute_allowed,
                      start, attempt)
    if attempt.oom is None or result.status is not Status.error:  # a rejection found beside it stands
        return result
    log.warning("session.oom_retry", task=task.id, phase=phase, error=attempt.oom[:300])
    attempt = _Attempt(exclusive=True)
    result = _session(evaluator, phase, task, root, so_path, body, seeds, before, timing, torch_compute_allowed,
                      start, attempt)
    if result.status is Status.error:
        result.message += "\n(ran twice: again with the device held alone after an out-of-memory error)"
    return result


@dataclass
class _Attempt:
    """One try of a session: whether it holds the device alone, the cleanup that may wait until its verdict is out,
    and the out-of-memory error of the harness's own that ended it (None: none did)."""

    exclusive: bool = False
    deferred: list[Callable[[], None]] = field(default_factory=list)
    oom: str | None = None
    #: Seconds this try waited for its memory reservation and for its reference process (warm, or started then):
    #: the session's ``phase_s['memory_wait']`` and ``phase_s['reference']``.
    waits: dict[str, float] = field(default_factory=dict)

    def note_failure(self, exc: ReferenceError_) -> None:
        """A reference process failed: an out-of-memory error of a session not yet alone earns the retry."""
        if not self.exclusive and is_out_of_memory(str(exc)):
            self.oom = str(exc)


def is_out_of_memory(message: str) -> bool:
    """A reference process's failure (its exception's name and text) is an out-of-memory error."""
    return any(marker in message for marker in OOM_MARKERS)


def _session(evaluator: Evaluator, phase: str, task: TaskManifest, root: Path, so_path: Path | None, body: Strategy,
             seeds: list[int] | None, before: dict[str, str], timing: bool, torch_compute_allowed: bool, start: float,
             attempt: _Attempt) -> CandidateResult:
    """One try of :func:`run_session`: a fresh runner and reference process, inside the memory reservation."""
    ctx = evaluator.context(phase)
    runners = evaluator.runners(phase)
    result = CandidateResult(task_id=task.id, phase=phase, status=Status.correct,  # type: ignore[arg-type]
                             isolation=runners.isolation, integrity_weakened=ctx.integrity.weakened())
    seeds = seeds or [secrets.randbits(31) for _ in range(ctx.settings.verify.input_sets)]
    n_sets, n_fresh = wanted_sets(ctx, task, len(seeds), timing=timing, phase=phase)
    try:
        plan = evaluator.memory.plan(task, wanted_sets=n_sets, wanted_fresh=n_fresh)
    except TooLarge as exc:
        return fold(evaluator, result, start, status=Status.too_large, message=str(exc))
    try:
        with contextlib.ExitStack() as stack:
            # A wait for room in the budget keeps no timed batch waiting, nor another step off the device; the room
            # is never made by closing this task's own warm process (the session would start it again at once).
            t_memory = time.perf_counter()
            with ctx.lock.outside(), released_step_places(), evaluator.references.sparing(task):
                stack.enter_context(evaluator.memory.session(task, plan, exclusive=attempt.exclusive))
            attempt.waits["memory_wait"] = time.perf_counter() - t_memory
            try:
                folded = _run(evaluator, ctx, runners, result, start, phase, task, root, so_path, body, seeds,
                              before, timing, plan, torch_compute_allowed, attempt)
            except BaseException:  # a harness bug or Ctrl-C: clean up now, inside the reservation, then raise
                _run_steps(attempt.deferred)
                raise
            if attempt.deferred:  # the sets' drop and the reservation's end happen after the verdict is returned
                _after(evaluator, ctx, attempt.deferred, stack.pop_all())
            return folded
    except TimeoutError as exc:  # the budget never had room: other sessions held it all along
        return fold(evaluator, result, start, status=Status.error, message=f"harness: {exc}")


def _after(evaluator: Evaluator, ctx: SessionContext, work: list[Callable[[], None]],
           reservation: contextlib.ExitStack) -> None:
    """Run a finished session's ``work`` (its sets' drop, the reference's release) on a thread, holding the device
    in the shared mode (a timed batch never runs beside the frees), then end its memory ``reservation``: the
    verdict goes back a drop earlier (0.2 s a call at 6 GiB per set), and no other session counts on the memory
    before it is free. :meth:`Evaluator.close` waits for these threads."""
    def run() -> None:
        try:
            try:
                ctx.lock.enter_shared()
            except Exception as exc:  # noqa: BLE001 - the cleanup still runs (a drop beside a timed batch at worst)
                log.warning("session.cleanup_unlocked", error=f"{type(exc).__name__}: {exc}"[:300])
                _run_steps(work)
                return
            try:
                _run_steps(work)
            finally:
                ctx.lock.exit_shared()
        finally:
            reservation.close()

    thread = threading.Thread(target=run, name="session-cleanup", daemon=True)
    try:
        thread.start()
    except RuntimeError:  # no thread to be had: clean up now
        try:
            _run_steps(work)
        finally:
            reservation.close()
        return
    evaluator.track_cleanup(thread)


def _reference_for_session(evaluator: Evaluator, task: TaskManifest, attempts: int = 3) -> Any:
    """``task``'s reference process, held for this session alone (``session_lock``): its leak probe, peak counter
    and input checks are process-wide, so the same task's next session waits here for the previous one's deferred
    drop. A process retired meanwhile (that drop found memory pinned) is let go and the pool asked again."""
    for _ in range(attempts):
        ref = evaluator.references.acquire(task)
        ref.session_lock.acquire()
        if ref.alive:
            return ref
        ref.session_lock.release()
        evaluator.references.release(ref)
    raise ReferenceError_(f"the reference process of {task.id} was retired {attempts} times while a session waited")


def _run_steps(work: list[Callable[[], None]]) -> None:
    """Each cleanup step in order; one that fails is logged and the next still runs (the reference's release
    must follow a drop that failed)."""
    for step in work:
        try:
            step()
        except Exception as exc:  # noqa: BLE001 - logged; the caller ends the memory reservation either way
            log.warning("session.cleanup_failed", error=f"{type(exc).__name__}: {exc}"[:300])


def _run(evaluator: Evaluator, ctx: SessionContext, runners: Any, result: CandidateResult, start: float, phase: str,
         task: TaskManifest, root: Path, so_path: Path | None, body: Strategy, seeds: list[int],
         before: dict[str, str], timing: bool, plan: SetPlan | None, torch_compute_allowed: bool,
         attempt: _Attempt) -> CandidateResult:
    """:func:`run_session` inside its memory reservation; what may wait until the verdict is out (dropping the
    session's sets, releasing the reference process) is appended to ``attempt.deferred``."""
    deferred = attempt.deferred
    lock_before = ctx.lock.thread_counters()  # the session runs on this thread: its lock use is the difference
    try:
        # A process start (seconds: torch import, the model built; warm-ups start processes without the lock too)
        # and the wait for the previous session of this task: no timed batch waits for either.
        t_reference = time.perf_counter()
        with ctx.lock.outside(), released_step_places():
            ref = _reference_for_session(evaluator, task)
        attempt.waits["reference"] = time.perf_counter() - t_reference
    except ReferenceError_ as exc:
        attempt.note_failure(exc)
        return fold(evaluator, result, start, status=Status.error, message=f"harness could not run the reference: {exc}")
    sess: Session | None = None
    proc = None
    try:
        t_acquire = time.perf_counter()
        with ctx.lock.outside(), released_step_places():  # a runner starting: no timed batch or step waits for it
            proc = runners.acquire()
        limits = ctx.settings.limits
        runner = RunnerClient(proc, call_timeout_s=limits.call_timeout_s, load_timeout_s=limits.load_timeout_s,
                              request_timeout_s=limits.request_timeout_s)
        caps = plan is not None and plan.constrained
        sess = Session(ctx, task, runner, ref, reference_sets=plan.reference_sets if caps else None,
                       runner_sets=plan.runner_sets if caps else None, torch_compute_allowed=torch_compute_allowed)
        sess.tick("acquire", t_acquire)
        for name, seconds in attempt.waits.items():
            sess.diagnostics.phase_s[name] = round(seconds, 6)
        sess.diagnostics.runner_start_s = proc.start_s
        sess.diagnostics.runner_start_phases = proc.start_phases
        sess.diagnostics.runner_start_cpu_s = proc.start_cpu_s
        if timing and ctx.kind == "cuda":  # how this runner sized its pre-roll spin (made when it started)
            sess.diagnostics.runner_spin = runner.ready().spin
        sess.open(root, so_path, seeds, timing=timing)
        _note_memory(evaluator, sess, plan, attempt.exclusive)
        if not sess.violations:
            body(sess, result)
        if not sess.violations:
            sess.close_checks()
    except CandidateDied as exc:
        status = Status.timeout if exc.reason == "timeout" else Status.error
        tail = proc.output_tail() if proc else ""
        return fold(evaluator, result, start, sess=sess, status=status, message=str(exc), output=tail, root=root,
                    before=before)
    except CandidateFailed as exc:
        tail = proc.output_tail() if proc else ""
        return fold(evaluator, result, start, sess=sess, status=Status.error, message=str(exc), output=tail,
                    tb=exc.tb, root=root, before=before)
    except ReferenceError_ as exc:
        # A reference process that failed a request (a CUDA error, an out-of-memory) is never used again.
        evaluator.references.retire(task, ref)
        attempt.note_failure(exc)
        return fold(evaluator, result, start, sess=sess, status=Status.error, message=f"harness reference failed: {exc}")
    finally:
        t_end = time.perf_counter()
        if sess is not None:
            evaluator.used_seeds.update(sess.sets.seeds())
            sess.sets.close_staged()  # fresh sets staged but never handed over (the batch ended early)
        if proc is not None:
            runners.release(proc)
        if sess is not None:
            t_end = sess.tick("release", t_end)
            sess.diagnostics.device_lock = lock_use_since(ctx.lock, lock_before)
            if ref.alive:
                try:
                    sess.sets.read_peak()  # the reference's peak for the memory record (the drop comes later)
                except ReferenceError_:
                    pass
                sess.tick("reference_peak", t_end)
            _note_memory(evaluator, sess, plan, attempt.exclusive)
        if sess is not None and ref.alive:
            deferred.append(functools.partial(_drop_sets, evaluator, sess))
            deferred.append(functools.partial(evaluator.references.release, ref))
            deferred.append(ref.session_lock.release)
        else:
            evaluator.references.release(ref)
            ref.session_lock.release()
    return fold(evaluator, result, start, sess=sess, root=root, before=before)


def lock_use_since(lock: Any, before: dict[str, float]) -> dict[str, float]:
    """This thread's use of ``lock`` since the reading ``before`` (:meth:`TimingLock.thread_counters`), rounded."""
    now = lock.thread_counters()
    return {k: round(now[k] - before.get(k, 0.0), 6) for k in now}


def _note_memory(evaluator: Evaluator, sess: Session, plan: SetPlan | None, exclusive: bool = False) -> None:
    """Record the session's memory plan and peaks (``exclusive``: it held the device alone); teach the planner the
    temporaries the reference measured."""
    made = [sess.sets[k].made for k in sess.sets.indices()]
    work = max((x.work_bytes for x in made), default=0)
    evaluator.memory.note_work(sess.task, work)
    fp = evaluator.memory.footprint(sess.task)
    if plan is None or fp is None:
        return
    peaks = [p for p in (sess.sets.reference_peak_bytes, sess.runner_peak_bytes) if p is not None]
    sess.diagnostics.memory = MemoryInfo(**evaluator.memory.describe(plan, sess.sets.remade,
                                                                     sum(peaks) if peaks else None, fp,
                                                                     exclusive),
                                         exports_released_bytes=sess.sets.exports_released_bytes)


def _drop_sets(evaluator: Evaluator, sess: Session) -> None:
    """Drop the session's sets; retire the reference process if device memory stays pinned."""
    try:
        pinned = sess.sets.drop()
    except ReferenceError_:
        pinned = 0
    if pinned > LEAK_LIMIT_BYTES:
        # A candidate that kept CUDA IPC mappings and died leaves the producer's blocks in limbo.
        log.warning("reference.recycled", task=sess.task.id, pinned_mb=pinned // 2**20)
        evaluator.references.retire(sess.task, sess.reference)


def fold(evaluator: Evaluator, result: CandidateResult, start: float, *, sess: Session | None = None,
         status: Status | None = None, message: str = "", output: str = "", tb: str = "", root: Path | None = None,
         before: dict[str, str] | None = None) -> CandidateResult:
    """Fold what the session found into ``result`` (rejections outrank failures, failures outrank wrong outputs)."""
    violations: list[Violation] = list(sess.violations) if sess else []
    if root is not None and before is not None and workspace_digest(root) != before:
        violations.append(Violation(rule="T23.outside.workspace_modified",
                                    message="the candidate changed files in the workspace"))
    if sess:
        result.errors = sess.errors
        result.flags = list(dict.fromkeys(result.flags + sess.flags))
        result.seeds = sess.sets.seeds()
        result.diagnostics = sess.diagnostics
    if output:
        result.diagnostics.output_tail = output
    if tb:
        result.diagnostics.traceback = tb[-3000:]
    if violations:
        first = violations[0]
        result.status = Status.rejected
        result.rule = first.rule
        result.message = "; ".join(f"[{v.rule}] {v.message}" for v in violations[:5])
        result.errors = [CheckError(check=v.rule, message=v.message) for v in violations] + result.errors
        result.timing = None
        result.speedup_eager = result.speedup_compile = None
    elif status is not None:
        result.status = status
        result.message = message + (f"\n{tb.strip().splitlines()[-1]}" if tb and tb.strip() else "")
        result.timing = None
    elif sess and sess.errors:
        result.status = Status.incorrect
        sets = sorted({e.input_set for e in sess.errors if e.input_set is not None})
        result.message = f"outputs differ from the reference on input set(s) {sets}: " + sess.errors[0].message
        result.timing = None
        result.speedup_eager = result.speedup_compile = None
    else:
        result.status = Status.correct
        result.message = f"outputs match the reference on {len(sess.sets) if sess else 0} input sets"
    result.duration_s = time.monotonic() - start
    result.provenance = evaluator.provenance()
    return result
