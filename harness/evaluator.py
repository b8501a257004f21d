"""The trusted evaluator: verify, profile and grade one built candidate.

``Evaluator(kind, settings).verify(task, workspace_root, so_path)`` runs the
candidate in a pre-started sandboxed runner and checks it against the
trusted reference process; ``profile`` adds timing in the same protocol
(timed calls use fresh inputs, spot-checked: T12/T13) and baselines;
``grade`` is the trusted final pass (:mod:`cuda_agent.harness.grading`).

Every call returns a :class:`~cuda_agent.schemas.CandidateResult` and never
raises for anything the candidate does: crashes, timeouts, memory blow-ups
and integrity violations become statuses with messages the agent can act on.
"""

from __future__ import annotations

import collections
import hashlib
import platform
import secrets
import shutil
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import structlog

from cuda_agent.harness._affinity import timing_cpus
from cuda_agent.harness._vmm import close_fds
from cuda_agent.harness.baselines import BaselineCache, cached_baselines
from cuda_agent.harness.fresh_sets import (NEIGHBOURS, fresh_count, fresh_pairs, fresh_positions, fresh_summary,
                                           slower_on_fresh)
from cuda_agent.harness.reference import ReferenceError_, ReferenceProcess, close_all
from cuda_agent.harness.sandbox import CandidateDied, CandidatePool, CandidateProcess
from cuda_agent.harness.settings import DEVICE_DEFAULTS, TOLERANCE_PRESETS, HarnessSettings
from cuda_agent.harness.timing import TimingLock, method_id, net_of_overhead, speed_of_light_ms, summarize, timing_done
from cuda_agent.schemas.result import CandidateResult, CheckError, Provenance, Status
from cuda_agent.schemas.task import TaskManifest

log = structlog.get_logger(__name__)

#: Working sets above this many bytes rotate through only two input sets (device memory).
BIG_WORKING_SET = 256 * 2**20
#: Device bytes still held by a reference process after an evaluation that make it restart.
LEAK_LIMIT_BYTES = 1 << 30
#: How many verified builds an evaluator remembers (for ``reverify_sets``).
VERIFIED_MEMORY = 64
#: Fewest input sets a timed loop rotates over, whatever the working set (a result cache keyed on one input must miss).
MIN_ROTATION_SETS = 3

class _CandidateFailed(Exception):
    """The candidate raised inside the runner (import error, exception in forward)."""

    def __init__(self, message: str, tb: str = "") -> None:
        super().__init__(message)
        self.tb = tb


@dataclass
class _Session:
    """State of one evaluation: one runner, one reference, the seeds, what was found."""

    task: TaskManifest
    proc: CandidateProcess
    ref: ReferenceProcess
    sets: dict[int, dict[str, Any]] = field(default_factory=dict)
    errors: list[CheckError] = field(default_factory=list)
    violations: list[dict[str, Any]] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)
    seeds: list[int] = field(default_factory=list)
    n_verify: int = 0  # the first n_verify sets are checked in full; later ones are timing sets
    calls: int = 0
    #: Timed calls on sets made for that call (harness/fresh_sets.py): (fresh ms, its rotated neighbours' median).
    fresh_pairs: list[tuple[float, float]] = field(default_factory=list)
    #: Fresh sets staged in memory files or device allocations, not handed over yet: set -> our descriptors.
    set_fds: dict[int, list[int]] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)

    def tick(self, phase: str, since: float) -> float:
        """Add the seconds since ``since`` to ``extra['phase_s'][phase]``; returns now (for the next phase)."""
        now = time.perf_counter()
        table = self.extra.setdefault("phase_s", {})
        table[phase] = round(table.get(phase, 0.0) + now - since, 6)
        return now


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


def stage_candidate(stage: Path, root: Path, so_path: Path | None) -> tuple[Path, Path]:
    """Copy the workspace and the built module into the runner's read-only stage folder."""
    ws = stage / "ws"
    so_dir = stage / "so"
    shutil.copytree(root, ws, ignore=shutil.ignore_patterns("__pycache__", "build", ".snapshots", "*.o"), symlinks=False)
    so_dir.mkdir()
    if so_path is not None:
        shutil.copy2(so_path, so_dir / Path(so_path).name)
    return ws, so_dir


class Evaluator:
    """Verifies, profiles and grades candidates of one backend on one device.

    :param kind: 'cpu' or 'cuda'.
    :param settings: harness settings (defaults when None).
    :param device_index: CUDA device ordinal (ignored on CPU).
    """

    def __init__(self, kind: Literal["cpu", "cuda"], settings: HarnessSettings | None = None, device_index: int = 0) -> None:
        self.kind = kind
        self.settings = settings or HarnessSettings()
        if kind == "cuda" and self.settings.timing_net_overhead and not self.settings.timing_preroll_us:
            # Seen in a GPU test that built its settings without the CUDA defaults: every calibration read 22-34 us.
            raise ValueError(
                "timing_net_overhead needs a pre-roll spin (timing_preroll_us > 0; the CUDA backend's default is "
                f"{DEVICE_DEFAULTS['cuda']['timing_preroll_us']}): without one a null call's time is the launch "
                "latency of the host's enqueue (22-34 us on the H200), over the 20 us limit of a cost that is "
                "subtracted, so nothing would be netted. Set timing_preroll_us, or use "
                "HarnessSettings.with_device_defaults('cuda').")
        self.device = "cpu" if kind == "cpu" else f"cuda:{device_index}"
        self.device_index = device_index
        self.pool = CandidatePool(self.device, self.settings)
        self.isolation = self.pool.isolation
        self.lock = TimingLock(f"{kind}{device_index}")
        self.cache = BaselineCache(self.settings.resolved_baseline_cache())
        self._refs: dict[str, ReferenceProcess] = {}
        self._refs_lock = threading.Lock()
        self._spare_refs: collections.deque[ReferenceProcess] = collections.deque()  # started, no task yet
        self._ref_start_locks: dict[str, threading.Lock] = {}  # one process start per task at a time
        self._provenance: Provenance | None = None
        #: Seeds of every evaluation so far; the grading pass never reuses one.
        self.used_seeds: set[int] = set()
        #: Builds (see :func:`build_key`) that passed verify or profile here, oldest first (an ordered set).
        self._verified: dict[str, None] = {}
        #: Why the 'vmm' output transport failed here (None: not failed); 'host' is used from then on.
        self.vmm_failure: str | None = None
        #: A 'vmm' hand-over has succeeded here: later failures are the candidate's, not the environment's.
        self.vmm_confirmed = False
        #: Fresh sets handed over by descriptor (``fresh_set_transport``), per kind ('memfd', 'vmm'): why that kind
        #: failed here before it ever worked (not used again), and the kinds that have worked.
        self.fd_failures: dict[str, str] = {}
        self.fd_confirmed: set[str] = set()

    # ------------------------------------------------------------------ public API
    def verify(self, task: TaskManifest, workspace_root: Path, so_path: Path | None) -> CandidateResult:
        """Phase 'verify': N input sets from secret seeds, every check; no timing."""
        return self._evaluate("verify", task, Path(workspace_root), so_path, time_it=False)

    def profile(self, task: TaskManifest, workspace_root: Path, so_path: Path | None) -> CandidateResult:
        """Phase 'profile': verify, then time (spot-checked) and compare with cached baselines."""
        return self._evaluate("profile", task, Path(workspace_root), so_path, time_it=True)

    def grade(self, task: TaskManifest, workspace_root: Path, so_path: Path | None) -> CandidateResult:
        """Phase 'grade': the trusted final pass (fresh seeds and process, ABAB timing)."""
        from cuda_agent.harness.grading import grade

        return grade(self, task, Path(workspace_root), so_path)

    def close(self) -> None:
        """Stop the runners and reference processes (all reference processes at once)."""
        self.pool.close()
        with self._refs_lock:
            refs, self._refs = list(self._refs.values()), {}
            refs += list(self._spare_refs)
            self._spare_refs.clear()
        close_all(refs)

    def __enter__(self) -> Evaluator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ helpers
    def provenance(self) -> Provenance:
        """Machine and software facts recorded in every result."""
        if self._provenance is None:
            import torch

            from cuda_agent import __version__ as version

            device = platform.processor() or platform.machine()
            driver = None
            if self.kind == "cuda" and torch.cuda.is_available():
                device = torch.cuda.get_device_name(self.device_index)
                try:
                    import pynvml

                    pynvml.nvmlInit()
                    driver = pynvml.nvmlSystemGetDriverVersion()
                except Exception:
                    pass
            self._provenance = Provenance(
                backend=self.kind,
                device=str(device),
                driver=str(driver) if driver else None,
                cuda=torch.version.cuda,
                torch=torch.__version__,
                python=platform.python_version(),
                package_version=str(version),
                host=socket.gethostname(),
            )
        return self._provenance

    def acquire_reference(self, task: TaskManifest) -> ReferenceProcess:
        """The warm reference process of ``task``, counted as in use until :meth:`release_reference`.

        At most ``settings.warm_references`` stay warm (least recently used closed first), but never one in use: an
        episode's session keeps its process whatever other tasks start meanwhile. A process starts outside the
        evaluator-wide lock (one start per task at a time), so a task whose reference is warm never waits for
        another task's process to import torch and initialise the device.
        """
        key = task.code_hash
        with self._refs_lock:
            start_lock = self._ref_start_locks.setdefault(key, threading.Lock())
        victims: list[ReferenceProcess] = []
        with start_lock:
            with self._refs_lock:
                ref = self._refs.pop(key, None)
                if ref is not None and ref.alive:
                    ref.users += 1
                    self._refs[key] = ref  # most recent last
                    victims = self._evictions()
                    dead = None
                else:
                    dead, ref = ref, None
            if ref is None:
                if dead is not None:
                    dead.close()
                ref = self._new_reference(task)
                with self._refs_lock:
                    ref.users += 1
                    self._refs[key] = ref
                    victims = self._evictions()
        close_all(victims)
        return ref

    def _spawn_reference(self) -> ReferenceProcess:
        """A reference process started now without its task (it imports torch meanwhile)."""
        s = self.settings
        return ReferenceProcess(None, self.device, threads=s.cpu_threads, preroll_us=s.timing_preroll_us,
                                net_overhead=self.net_overhead, compile_threads=s.reference_compile_threads,
                                preimport_compile=s.with_compile_baseline,
                                cpus=timing_cpus(self.device, s.timing_cpus), flush_multiple=s.timing_l2_flush_multiple,
                                warm_pages=s.timing_warm_input_pages, clone_inputs=s.baseline_clone_inputs,
                                preroll_retakes=s.timing_preroll_retakes, preroll_max_us=s.timing_preroll_max_us)

    def _new_reference(self, task: TaskManifest) -> ReferenceProcess:
        """``task``'s reference process: a spare that is still alive, else one started now; then the spares are
        topped up to ``settings.spare_references`` (their start is ``Popen``: nothing here waits for an import)."""
        ref = None
        with self._refs_lock:
            while self._spare_refs and ref is None:
                cand = self._spare_refs.popleft()
                if cand.alive:
                    ref = cand
                else:
                    cand.close()
        if ref is None:
            ref = self._spawn_reference()
        self._fill_spare_references()
        ref.start(task.code, self.settings.init_seed)
        return ref

    def _fill_spare_references(self) -> None:
        with self._refs_lock:  # a Popen each (milliseconds); under the lock so concurrent tasks do not overshoot
            while len(self._spare_refs) < self.settings.spare_references:
                self._spare_refs.append(self._spawn_reference())

    def release_reference(self, ref: ReferenceProcess) -> None:
        """Undo one :meth:`acquire_reference`; closes processes beyond the warm limit that are now unused."""
        with self._refs_lock:
            ref.users = max(0, ref.users - 1)
            victims = self._evictions()
            if ref.retired and ref.users == 0:
                victims.append(ref)
        close_all(victims)

    def _evictions(self) -> list[ReferenceProcess]:
        """Unused processes beyond ``warm_references``, oldest first, removed from the map (caller holds the lock
        and closes them after releasing it)."""
        excess = len(self._refs) - self.settings.warm_references
        out = []
        for key in list(self._refs):
            if excess <= 0:
                break
            if self._refs[key].users == 0:
                out.append(self._refs.pop(key))
                excess -= 1
        return out

    def warm_reference(self, task: TaskManifest) -> ReferenceProcess | None:
        """``task``'s reference process if one is warm and alive now, else None; starts nothing (diagnostics:
        ``benchmarks/eval_throughput.py --diagnose``)."""
        with self._refs_lock:
            ref = self._refs.get(task.code_hash)
        return ref if ref is not None and ref.alive else None

    def reference(self, task: TaskManifest) -> ReferenceProcess:
        """The warm reference process of ``task`` (not held: for one-off calls; sessions use :meth:`acquire_reference`)."""
        ref = self.acquire_reference(task)
        self.release_reference(ref)
        return ref

    def prepare(self, task: TaskManifest) -> bool:
        """Start ``task``'s reference process and warm its baselines (torch.compile included) now.

        Meant to run before a caller takes a device slot (the eval runner's scheduler does): the seconds of process
        start and compilation then hold no lock. Idempotent per reference process; returns True when it did work.
        """
        ref = self.acquire_reference(task)
        try:
            if ref.warmed:
                return False
            ref.call("warm_baselines", self.settings.compile_mode, self.settings.with_compile_baseline)
            ref.warmed = True
            return True
        finally:
            self.release_reference(ref)

    def tolerance_table(self, task: TaskManifest) -> dict[str, tuple[float, float]]:
        """dtype -> (atol, rtol) for this task (settings preset, task overrides, settings overrides)."""
        preset = self.settings.tolerance if task.precision.tolerance not in TOLERANCE_PRESETS else task.precision.tolerance
        table = dict(TOLERANCE_PRESETS[preset])
        out = {}
        for dtype, (atol, rtol) in table.items():
            atol = task.precision.atol if task.precision.atol is not None else atol
            rtol = task.precision.rtol if task.precision.rtol is not None else rtol
            atol = self.settings.atol if self.settings.atol is not None else atol
            rtol = self.settings.rtol if self.settings.rtol is not None else rtol
            out[dtype] = (atol, rtol)
        return out

    # ------------------------------------------------------------------ the protocol
    def _evaluate(
        self, phase: str, task: TaskManifest, root: Path, so_path: Path | None, *, time_it: bool
    ) -> CandidateResult:
        def body(sess: _Session, result: CandidateResult) -> None:
            self.verify_sets(sess, range(sess.n_verify))
            if not sess.errors and not sess.violations and time_it:
                self.time_session(sess, result)

        before = workspace_digest(root)
        key = build_key(task, before, so_path)
        seeds = None
        if time_it and key in self._verified:  # verify just passed on this exact build: check fewer sets first
            seeds = [secrets.randbits(31) for _ in range(min(self.settings.reverify_sets, self.settings.n_input_sets))]
        result = self.run_protocol(phase, task, root, so_path, body, seeds=seeds, before=before, timing=time_it)
        if seeds is not None:
            result.extra["reverified_sets"] = len(seeds)
        if result.passed:
            self._verified[key] = None
            while len(self._verified) > VERIFIED_MEMORY:
                self._verified.pop(next(iter(self._verified)))
        else:
            self._verified.pop(key, None)
        if result.passed and not time_it and self.kind == "cuda" and self.settings.sanitizer != "off":
            result = self.sanitizer_gate(task, root, so_path, result)
        return result

    def sanitizer_gate(self, task: TaskManifest, root: Path, so_path: Path | None, result: CandidateResult) -> CandidateResult:
        """One input set under compute-sanitizer (memcheck/racecheck/initcheck); errors reject (T21)."""
        tool = self.settings.sanitizer
        exe = shutil.which("compute-sanitizer")
        if exe is None:
            result.flags.append("sanitizer_unavailable")
            return result
        wrapper = [exe, "--tool", tool, "--print-limit", "20", "--error-exitcode", "99"]
        proc = self.pool.start_wrapped(wrapper)
        try:
            ref = self.acquire_reference(task)
            try:
                sess = _Session(task=task, proc=proc, ref=ref)
                self.open_session(sess, root, so_path, [secrets.randbits(31)])
                self.call(sess, 0, check=False)
                code = self.pool.finish(proc, self.settings.request_timeout_s)
            finally:
                self.release_reference(ref)
        except (CandidateDied, _CandidateFailed) as exc:
            code = 99
            result.extra["sanitizer_error"] = str(exc)
        finally:
            tail = proc.output_tail()
            self.pool.release(proc)
        result.extra["sanitizer"] = {"tool": tool, "exit_code": code, "output_tail": tail[-2000:]}
        if code == 99 or "ERROR SUMMARY: 0 errors" not in tail:
            result.status = Status.rejected
            result.rule = f"T21.sanitizer.{tool}"
            result.message = f"compute-sanitizer --tool {tool} reported errors:\n{tail[-1500:]}"
        return result

    def run_protocol(
        self,
        phase: str,
        task: TaskManifest,
        root: Path,
        so_path: Path | None,
        body: Callable[[_Session, CandidateResult], None],
        seeds: list[int] | None = None,
        before: dict[str, str] | None = None,
        timing: bool = False,
    ) -> CandidateResult:
        """One evaluation: fresh runner, secret seeds, ``body`` (checks/timing), closing checks, verdict.

        Whatever the candidate does (crash, hang, memory blow-up, exception,
        integrity violation) ends as a status of the returned result. ``before`` is the workspace's
        :func:`workspace_digest` when the caller already has it (re-checked after the run: T23). ``timing``:
        ``body`` times calls, so the timing sets are made up front with the verify sets.
        """
        start = time.monotonic()
        before = before if before is not None else workspace_digest(root)
        result = CandidateResult(task_id=task.id, phase=phase, status=Status.correct, isolation=self.isolation)  # type: ignore[arg-type]
        try:
            ref = self.acquire_reference(task)
        except ReferenceError_ as exc:
            return self._finish(result, start, status=Status.error, message=f"harness could not run the reference: {exc}")
        sess: _Session | None = None
        proc: CandidateProcess | None = None
        try:
            t_acquire = time.perf_counter()
            proc = self.pool.acquire()
            sess = _Session(task=task, proc=proc, ref=ref)
            sess.tick("acquire", t_acquire)
            if timing and self.kind == "cuda":  # how this runner sized its pre-roll spin (made when it started)
                sess.extra["runner_spin"] = proc.wait_ready().get("spin")
            seeds = seeds or [secrets.randbits(31) for _ in range(self.settings.n_input_sets)]
            self.open_session(sess, root, so_path, seeds, timing=timing)
            if not sess.violations:
                body(sess, result)
            if not sess.violations:
                self.close_checks(sess)
        except CandidateDied as exc:
            status = Status.timeout if exc.reason == "timeout" else Status.error
            tail = proc.output_tail() if proc else ""
            return self._finish(result, start, sess=sess, status=status, message=str(exc), output=tail, root=root, before=before)
        except _CandidateFailed as exc:
            tail = proc.output_tail() if proc else ""
            return self._finish(
                result, start, sess=sess, status=Status.error, message=str(exc), output=tail, tb=exc.tb, root=root, before=before
            )
        except ReferenceError_ as exc:
            return self._finish(result, start, sess=sess, status=Status.error, message=f"harness reference failed: {exc}")
        finally:
            t_end = time.perf_counter()
            if sess is not None:
                self.used_seeds.update(sess.seeds)
                for fds in sess.set_fds.values():  # fresh sets staged but never handed over (the batch ended early)
                    close_fds(fds)
                sess.set_fds.clear()
            if proc is not None:
                self.pool.release(proc)
            if sess is not None:
                t_end = sess.tick("release", t_end)
            if sess is not None and sess.ref.alive:
                self._release_sets(sess)
                sess.tick("drop_sets", t_end)
            self.release_reference(ref)
        return self._finish(result, start, sess=sess, root=root, before=before)

    def _release_sets(self, sess: _Session) -> None:
        """Drop the session's input sets; recycle the reference process if device memory stays pinned."""
        try:
            pinned = sess.ref.call("drop_sets", list(sess.sets))
        except ReferenceError_:
            pinned = 0
        if pinned > LEAK_LIMIT_BYTES:
            # A candidate that kept CUDA IPC mappings and died leaves the producer's blocks in limbo.
            # Retired: later sessions get a fresh process; this one closes when its last session releases it.
            log.warning("reference.recycled", task=sess.task.id, pinned_mb=pinned // 2**20)
            with self._refs_lock:
                if self._refs.get(sess.task.code_hash) is sess.ref:
                    self._refs.pop(sess.task.code_hash)
                sess.ref.retired = True

    def open_session(
        self, sess: _Session, root: Path, so_path: Path | None, seeds: list[int], *, timing: bool = False
    ) -> None:
        """Make the input sets (reference first), load the candidate, get the inputs to it.

        ``timing``: also make the sets the timed calls rotate over (:meth:`extra_timing_sets`), so they
        reach the runner with the others. With ``input_transport: seeded`` the runner makes every set
        itself from its seed before the candidate's code is imported; a set whose fingerprints differ
        from the reference's (or that failed there) is handed over instead.
        """
        sess.seeds = list(seeds)
        sess.n_verify = len(seeds)
        seeded = self.settings.input_transport == "seeded"
        t = time.perf_counter()
        for k, seed in enumerate(seeds):
            sess.sets[k] = self._make_set(sess, k, seed, stage=not seeded)
        if timing:
            for _ in range(self.extra_timing_sets(sess)):
                self._fresh_set(sess, stage=not seeded)
        t = sess.tick("make_sets", t)
        if timing and self.net_overhead:
            with self.lock:  # alone on the device, and before any candidate code exists in the runner
                answer = sess.proc.request(self.settings.call_timeout_s, op="calibrate")
            if not answer.get("ok"):
                raise _CandidateFailed(f"timing calibration failed: {answer.get('error')}", answer.get("traceback", ""))
            sess.extra["timing_overhead_ms"] = float(answer["overhead_ms"])
            sess.extra["runner_spin_recalibrated"] = answer.get("spin")  # sized again under the lock
            t = sess.tick("calibrate", t)
        specs = [o for o in sess.sets[0]["outputs"] if "shape" in o]
        ws_stage, so_stage = stage_candidate(sess.proc.stage, root, so_path)
        answer = sess.proc.request(
            self.settings.load_timeout_s,
            op="load",
            workspace=str(ws_stage),
            so_dir=str(so_stage),
            require_extension=so_path is not None,
            init_inputs=sess.ref.info["init_inputs"],
            init_seed=self.settings.init_seed,
            exchange=str(sess.proc.exchange),
            output_specs=specs,
            task_code=sess.task.code if seeded else None,
            seeded_sets={str(k): sess.seeds[k] for k in sess.sets} if seeded else {},
        )
        if not answer.get("ok"):
            raise _CandidateFailed(f"loading model_new.py failed: {answer.get('error')}", answer.get("traceback", ""))
        sess.violations += answer.get("violations", [])
        t = sess.tick("load", t)
        made = answer.get("seeded_fingerprints") or {}
        staged = [k for k in sess.sets if made.get(str(k)) != sess.sets[k]["input_fingerprints"]]
        for k in staged:
            if seeded:
                sess.sets[k]["tensors"] = sess.ref.call("stage_set", k, str(sess.proc.exchange), self.transport(sess.proc))
            self.send_inputs(sess, k)
        sess.extra["input_sets"] = {"seeded": len(sess.sets) - len(staged), "staged": len(staged)}
        sess.tick("send_inputs", t)

    def _make_set(self, sess: _Session, k: int, seed: int, *, stage: bool) -> dict[str, Any]:
        return sess.ref.call("make_set", k, seed, str(sess.proc.exchange), self.transport(sess.proc), stage)

    def _fresh_set(self, sess: _Session, *, stage: bool) -> int:
        """One more set of the session from a fresh secret seed (made by the reference); returns its index."""
        k = len(sess.sets)
        seed = secrets.randbits(31)
        sess.seeds.append(seed)
        sess.sets[k] = self._make_set(sess, k, seed, stage=stage)
        return k

    def extra_timing_sets(self, sess: _Session) -> int:
        """Sets beyond the verify sets that timed calls rotate over: ``timing_input_sets`` fresh ones when the
        working set is small, else enough for :data:`MIN_ROTATION_SETS` (device memory)."""
        if sess.sets[0].get("input_bytes", 0) <= BIG_WORKING_SET:
            return self.settings.timing_input_sets
        return max(0, MIN_ROTATION_SETS - len(sess.sets))

    def transport(self, proc: Any) -> str:
        """'ipc' or 'host' for this candidate process (settings.cuda_transport; 'auto': host under bubblewrap).

        CUDA IPC handles do not open inside bubblewrap (measured on the H200 with the host's PID and IPC
        namespaces shared, own user namespace: "mapping of buffer object failed"), so a sandboxed candidate gets
        its data staged through the exchange folder (and then needs no host namespace at all).
        """
        mode = self.settings.cuda_transport
        if mode == "auto":
            mode = "vmm" if getattr(proc, "isolation", "process") == "bwrap" else "ipc"
        if mode == "vmm" and self.vmm_failure is not None:
            return "host"
        return mode

    def transport_failure_is_environment(self, sess: _Session, why: str) -> bool:
        """Whether a 'vmm' hand-over that failed means the transport does not work here (True: 'host' files from
        now on) or that this candidate's buffers were bad (False: its export error).

        Until one 'vmm' check has succeeded on this evaluator, a failure is taken as the environment's (a driver or
        sandbox that refuses the handles), so honest candidates never fail for it; after that, the transport is
        known to work and a failure is the candidate's, so one candidate cannot switch the device to the slow path.
        """
        if self.vmm_confirmed:
            sess.extra["transport_note"] = f"this candidate's device buffers could not be read: {why[:200]}"
            return False
        self._vmm_failed(sess, why)
        return True

    def _vmm_failed(self, sess: _Session, why: str) -> None:
        """The 'vmm' transport does not work here: 'host' from now on for this evaluator (logged once)."""
        if self.vmm_failure is None:
            self.vmm_failure = why
            log.warning("transport.vmm_unavailable", reason=why[:300], fallback="host")
        sess.extra["transport_note"] = f"vmm unavailable ({why[:200]}); host files used"

    def send_inputs(self, sess: _Session, k: int) -> None:
        """Give the runner input set ``k`` (it keeps it pristine and copies it per call)."""
        answer = sess.proc.request(self.settings.load_timeout_s, op="inputs", set=k, tensors=sess.sets[k]["tensors"])
        if not answer.get("ok"):
            raise _CandidateFailed(f"receiving inputs failed: {answer.get('error')}", answer.get("traceback", ""))

    def add_sets(self, sess: _Session, count: int) -> list[int]:
        """Make ``count`` more input sets from fresh secret seeds and hand them over."""
        new = []
        t = time.perf_counter()
        for _ in range(count):
            k = self._fresh_set(sess, stage=True)
            self.send_inputs(sess, k)
            new.append(k)
        sess.tick("extra_sets", t)
        return new

    @property
    def net_overhead(self) -> bool:
        """Timed calls are reported net of the protocol's per-process cost (``timing_net_overhead``, CUDA only)."""
        return bool(self.settings.timing_net_overhead) and self.kind == "cuda"

    def call(self, sess: _Session, k: int, *, check: bool, audit: bool = False) -> float:
        """One forward on set ``k`` under the timing protocol; checks outputs when asked. Returns ms: with
        :attr:`net_overhead`, less the null-call cost the runner measured under the lock before the candidate was
        loaded (:meth:`open_session`; the wall-clock cross-check is made on the raw figure)."""
        ms = self._call_raw(sess, k, check=check, audit=audit)
        if not self.net_overhead:
            return ms
        return net_of_overhead(ms, float(sess.extra.get("timing_overhead_ms") or 0.0))

    def _call_raw(self, sess: _Session, k: int, *, check: bool, audit: bool = False) -> float:
        """:meth:`call` before the overhead is subtracted."""
        wall0 = time.perf_counter()
        answer = sess.proc.request(self.settings.call_timeout_s, op="call", set=k, audit=audit)
        wall_ms = (time.perf_counter() - wall0) * 1e3
        sess.tick("forward_calls", wall0)
        sess.calls += 1
        if not answer.get("ok"):
            raise _CandidateFailed(f"forward raised on input set {k}: {answer.get('error')}", answer.get("traceback", ""))
        ms = float(answer.get("ms", 0.0))
        if not (ms >= 0) or ms > wall_ms / self.settings.wall_clock_slack + 0.05:
            sess.violations.append(
                {
                    "rule": "T8.outside.wall_clock",
                    "message": f"reported {ms:.4f} ms for a call the harness saw take {wall_ms:.4f} ms",
                }
            )
        sess.violations += answer.get("violations", [])
        metas = answer.get("outputs", [])
        metas_ok = self._check_metas(sess, k, metas)
        if answer.get("input_fingerprints") != sess.sets[k]["input_fingerprints"]:
            sess.violations.append(
                {"rule": "T5.runtime.input_mutated", "message": f"forward modified its inputs (input set {k}); inputs are read-only"}
            )
        if not metas_ok or not check or sess.violations:
            return ms
        verdict = self._export_and_check(sess, k, metas, self.transport(sess.proc))
        if verdict.get("transport_failed"):
            why = str(verdict["transport_failed"])
            if self.transport_failure_is_environment(sess, why):  # files from now on; this call again by file
                verdict = self._export_and_check(sess, k, metas, "host")
            else:  # 'vmm' works here: this candidate's buffers did not
                verdict = {"errors": [{"check": "export", "message": f"handing over the outputs failed: {why}", "input_set": k}],
                           "violations": []}
        elif sess.extra.get("transport") == "vmm":
            self.vmm_confirmed = True
        sess.errors += [CheckError.model_validate(e) for e in verdict["errors"]]
        sess.violations += verdict["violations"]
        return ms

    def _export_and_check(self, sess: _Session, k: int, metas: list[dict[str, Any]], transport: str) -> dict[str, Any]:
        """Have the runner hand its last outputs over by ``transport``; the reference's verdict on them."""
        t = time.perf_counter()
        exported = sess.proc.request(self.settings.call_timeout_s, op="export", id=sess.calls, transport=transport)
        if not exported.get("ok"):
            raise _CandidateFailed(f"handing over outputs failed: {exported.get('error')}", exported.get("traceback", ""))
        if exported.get("vmm_error") and transport == "vmm":  # the runner used files for (some) outputs
            if self.vmm_confirmed:
                sess.extra["transport_note"] = f"runner fell back to files: {str(exported['vmm_error'])[:200]}"
            else:
                self._vmm_failed(sess, f"runner: {exported['vmm_error']}")
        outputs = exported.get("outputs", [])
        misplaced = self._misplaced_output_files(sess, outputs)
        if misplaced:
            sess.violations.append({
                "rule": "T23.runtime.export_path",
                "message": f"output(s) {misplaced} were handed over as files outside the exchange folder's output "
                "slots: the trusted side reads only <exchange>/out_<i>.bin",
            })
            return {"errors": [], "violations": []}
        n_vmm = sum(1 for d in outputs if isinstance(d, dict) and d.get("vmm"))
        fds: list[int] = []
        if n_vmm:
            try:
                # The runner sends them before its answer line, so they are already queued: a short wait.
                fds = sess.proc.recv_fds(n_vmm, min(5.0, self.settings.call_timeout_s))
            except ValueError as exc:
                raise _CandidateFailed(f"handing over outputs failed: {exc}") from exc
        sess.extra["transport"] = "vmm" if n_vmm else transport if transport != "vmm" else "host"
        t = sess.tick("export", t)
        sess.proc.freeze()  # the candidate cannot touch its outputs while the trusted side reads them
        try:
            return sess.ref.call("check", k, outputs, metas, self.tolerance_table(sess.task), pass_fds=fds)
        finally:
            sess.proc.thaw()
            close_fds(fds)
            sess.tick("check", t)

    @staticmethod
    def _misplaced_output_files(sess: _Session, outputs: list[Any]) -> list[int]:
        """Positions of outputs the runner described as a file other than its own slot, ``<exchange>/out_<i>.bin``.

        The description is the candidate process's word, and the reference opens what it names with the trusted
        side's rights: any other path (another folder, ``..``) would make it read a file of the candidate's choosing
        (and its mismatch report show the agent what is in it)."""
        return [i for i, d in enumerate(outputs)
                if isinstance(d, dict) and "file" in d and d["file"] != str(Path(sess.proc.exchange) / f"out_{i}.bin")]

    def _check_metas(self, sess: _Session, k: int, metas: list[dict[str, Any]]) -> bool:
        """Type/count/dtype/shape/device/alias checks on what the runner described; True = export it."""
        expected = sess.sets[k]["outputs"]
        if len(metas) != len(expected):
            sess.errors.append(
                CheckError(check="count", message=f"forward returned {len(metas)} output(s), the reference returns {len(expected)}", input_set=k)
            )
            return False
        ok = True
        for i, (m, e) in enumerate(zip(metas, expected)):
            if "shape" not in e:
                continue
            if not m.get("exact_tensor"):
                sess.violations.append(
                    {
                        "rule": "T11.runtime.not_a_tensor",
                        "message": f"output {i} is a {m.get('type')}, not exactly torch.Tensor (subclasses and proxies are refused)",
                    }
                )
                return False
            if m.get("alias_input"):
                sess.violations.append(
                    {"rule": "T19.runtime.output_aliases_input", "message": f"output {i} shares memory with an input; return new memory"}
                )
                return False
            if m.get("dtype") != e["dtype"]:
                sess.errors.append(CheckError(check="dtype", message=f"output {i}: expected dtype {e['dtype']}, got {m.get('dtype')}", input_set=k, output=i))
                ok = False
            elif list(m.get("shape", [])) != list(e["shape"]):
                sess.errors.append(CheckError(check="shape", message=f"output {i}: expected shape {e['shape']}, got {m.get('shape')}", input_set=k, output=i))
                ok = False
            elif m.get("device") != self.device.split(":")[0]:
                sess.errors.append(CheckError(check="device", message=f"output {i}: expected a {self.kind} tensor, got one on {m.get('device')}", input_set=k, output=i))
                ok = False
        return ok

    def verify_sets(self, sess: _Session, ks: Any) -> None:
        """Check every set in ``ks``; then the first set again (determinism, T21)."""
        ks = list(ks)
        for j, k in enumerate(ks):
            self.call(sess, k, check=True, audit=(j == 0))
            if sess.violations:
                return
        if self.settings.determinism_check and ks and not sess.errors:
            self.call(sess, ks[0], check=True)

    def timing_sets(self, sess: _Session) -> list[int]:
        """Sets rotated through timed calls: every set of the session (the timing sets were made up front
        when the session was opened with ``timing``; otherwise they are made now)."""
        ks = list(sess.sets)
        if len(ks) == sess.n_verify:
            ks += self.add_sets(sess, self.extra_timing_sets(sess))
        return ks

    def time_candidate(
        self, sess: _Session, ks: list[int], *, calls: int | None = None, max_checks: int | None = None,
        fresh_calls: int | None = None,
    ) -> tuple[list[float], float]:
        """Timed calls (warm-up first) rotating over ``ks``, spot-checked: every k-th from a secret offset (at most
        ``max_checks``), or, with a fixed number of ``calls`` and a cap, ``max_checks`` calls drawn at random.
        Before rotated calls at secret positions, extra calls on sets made for that call alone (``fresh_calls``,
        default :func:`fresh_count`; each handed over just before its call and checked; any not reached before the batch ends are made at its
        end), compared with the rotated calls just before them into ``sess.fresh_pairs`` (see
        :meth:`settle_fresh_sets`); their times are samples too. ``calls`` counts the rotated calls.

        Returns (ms samples, wall ms).
        """
        s = self.settings
        samples: list[float] = []
        offset = secrets.randbelow(s.spot_check_every)
        # A fixed number of calls with a cap: the checked calls are a random subset of all of them (a cap on the
        # every-k-th rule would check only the first calls, which a kernel could count).
        drawn = (set(secrets.SystemRandom().sample(range(calls), min(max_checks, calls)))
                 if calls is not None and max_checks is not None else None)
        if fresh_calls is None:
            fresh_calls = fresh_count(s, sess.sets[0].get("input_bytes", 0))
        fresh = self.fresh_sets(sess, fresh_calls)
        fresh_at = set(fresh_positions(calls if calls is not None else s.min_timed_calls, len(fresh), NEIGHBOURS))
        checks = 0
        wall_ms = 0.0
        sequence: list[tuple[bool, float]] = []  # (on a fresh set, ms) in call order

        def timed(k: int, check: bool, is_fresh: bool) -> None:
            nonlocal wall_ms
            t0 = time.perf_counter()
            ms = self.call(sess, k, check=check)
            wall_ms += (time.perf_counter() - t0) * 1e3
            samples.append(ms)
            sequence.append((is_fresh, ms))

        with self.lock:
            start = time.monotonic()  # the budget starts once the device is ours
            for j in range(s.warmup_calls if calls is None else 1):
                self.call(sess, ks[j % len(ks)], check=False)
            j = 0
            while True:
                if calls is not None and j >= calls:
                    break
                if calls is None and timing_done(samples, s, time.monotonic() - start):
                    break
                if j in fresh_at and fresh:  # before the j-th rotated call, an extra one on a new set
                    timed(self.hand_over(sess, fresh.pop(0)), True, True)
                    if sess.errors or sess.violations:
                        break
                if drawn is not None:
                    check = j in drawn
                else:
                    check = j % s.spot_check_every == offset and (max_checks is None or checks < max_checks)
                checks += check
                sess.extra["spot_checks"] = sess.extra.get("spot_checks", 0) + int(check)
                timed(ks[(j + offset) % len(ks)], check, False)
                j += 1
                if sess.errors or sess.violations:
                    break
            while fresh and not (sess.errors or sess.violations):
                timed(self.hand_over(sess, fresh.pop(0)), True, True)
        sess.fresh_pairs += fresh_pairs(sequence)
        return samples, wall_ms

    def fresh_sets(self, sess: _Session, count: int) -> list[int]:
        """``count`` sets from fresh secret seeds, made by the reference but not handed to the candidate yet
        (:meth:`hand_over`, just before each one's call: harness/fresh_sets.py). Where descriptors are used
        (:meth:`fd_kind`) they are staged now, outside the device lock, in memory files or device allocations no one
        else can reach; otherwise at hand-over, through files."""
        t = time.perf_counter()
        ks = [self._fresh_set(sess, stage=False) for _ in range(count)]
        kind = self.fd_kind(sess)
        for k in ks if kind else ():
            try:
                answer, fds = sess.ref.call_with_fds("stage_fds", k, kind == "vmm")
            except ReferenceError_ as exc:
                if not sess.ref.alive:
                    raise
                self._fd_failed("memfd", f"the reference could not stage a set: {exc}")
                break
            sess.set_fds[k] = fds
            sess.sets[k]["tensors"] = answer["tensors"]
            if answer.get("vmm_error"):
                self._fd_failed("vmm", f"the reference could not export device memory: {answer['vmm_error']}")
        sess.tick("fresh_sets", t)
        return ks

    def fd_kind(self, sess: _Session) -> str | None:
        """How this session's fresh sets are handed over by descriptor: 'vmm' (device allocations, CUDA with the
        'vmm' transport), 'memfd' (memory files), or None (files at hand-over; ``fresh_set_transport``)."""
        mode = self.settings.fresh_set_transport
        if mode == "files" or getattr(sess.proc, "fd_sock", None) is None or "memfd" in self.fd_failures:
            return None
        transport = self.transport(sess.proc) if self.kind == "cuda" else "host"
        if mode == "auto" and transport == "ipc":
            return None
        return "vmm" if transport == "vmm" and "vmm" not in self.fd_failures else "memfd"

    def _fd_failed(self, kind: str, why: str) -> None:
        """A descriptor hand-over of ``kind`` failed: unless that kind has worked here before (then the candidate's
        process is to blame, and only its set goes through files), it is not used again by this evaluator."""
        if kind in self.fd_confirmed or kind in self.fd_failures:
            return
        self.fd_failures[kind] = why
        log.warning("transport.fresh_set_descriptors_unavailable", kind=kind, reason=why[:300])

    def hand_over(self, sess: _Session, k: int) -> int:
        """Give set ``k`` to the runner now: its descriptors where it was staged in memory files or device
        allocations, else staged now through the exchange folder's reusable slots (files, or IPC handles); returns
        ``k``."""
        t = time.perf_counter()
        sess.extra["fresh_hand_overs"] = sess.extra.get("fresh_hand_overs", 0) + 1
        fds = sess.set_fds.pop(k, None)
        if fds is not None and self._hand_over_fds(sess, k, fds):
            sess.tick("fresh_hand_over", t)
            return k
        sess.sets[k]["tensors"] = sess.ref.call("stage_set", k, str(sess.proc.exchange), self.transport(sess.proc), True)
        self.send_inputs(sess, k)
        sess.tick("fresh_hand_over", t)
        return k

    def _hand_over_fds(self, sess: _Session, k: int, fds: list[int]) -> bool:
        """Pass set ``k``'s descriptors and its description to the runner; False when it could not read them (the
        caller hands the set over through files)."""
        from cuda_agent.harness._vmm import close_fds, send_fds

        kind = "vmm" if any(d.get("vmm") for d in sess.sets[k]["tensors"]) else "memfd"
        try:
            send_fds(sess.proc.fd_sock, fds)
            answer = sess.proc.request(self.settings.load_timeout_s, op="inputs", set=k, tensors=sess.sets[k]["tensors"])
        except OSError as exc:
            answer = {"ok": False, "fd_error": True, "error": f"descriptors not sent: {exc}"}
        finally:
            close_fds(fds)
        if answer.get("ok"):
            self.fd_confirmed.add(kind)
            return True
        if not answer.get("fd_error"):
            raise _CandidateFailed(f"receiving inputs failed: {answer.get('error')}", answer.get("traceback", ""))
        sess.extra.setdefault("fresh_set_fallbacks", []).append(f"{kind}: {str(answer.get('error'))[:200]}")
        self._fd_failed(kind, f"the runner could not read a set: {answer.get('error')}")
        return False

    def settle_fresh_sets(self, sess: _Session, samples: list[float], confirm: Callable[[], list[float]]) -> list[float]:
        """The candidate's timed samples after the fresh-set rule (harness/fresh_sets.py).

        ``samples`` as they are unless its calls on never-seen sets (of every batch so far) ran slower than the
        rotated calls just before them by more than ``fresh_set_slack``. Then the gap is looked at again:
        ``confirm()`` runs one more batch of the same form (a profile's timing batch; a grading round) and returns
        its samples, and that batch's fresh calls decide. Slower again: the fresh calls' times of both looks (flag
        ``fresh_inputs_slower``). Not slower: the confirming batch's samples (a gap that noise opened; a cache
        that chose to miss there is timed at its misses). Records ``extra['fresh_sets']``."""
        first = sess.fresh_pairs
        if not first:
            return samples
        slack = self.settings.fresh_set_slack
        if not slower_on_fresh(first, slack):
            sess.extra["fresh_sets"] = fresh_summary(first, "all")
            return samples
        sess.fresh_pairs = []
        t = time.perf_counter()
        again = confirm()
        sess.tick("fresh_confirmation", t)
        second, sess.fresh_pairs = sess.fresh_pairs, first + sess.fresh_pairs
        looks = {"first_look": fresh_summary(first, "none")}
        if second and not slower_on_fresh(second, slack):
            sess.extra["fresh_sets"] = {**fresh_summary(second, "confirmation"), **looks}
            return again
        sess.extra["fresh_sets"] = {**fresh_summary(first + second, "fresh"), **looks}
        sess.flags.append("fresh_inputs_slower")
        return [f for f, _ in first + second]

    def time_session(self, sess: _Session, result: CandidateResult) -> None:
        """Profile: candidate timing, baselines (cached), speedups, floors."""
        ks = self.timing_sets(sess)
        prov = self.provenance()
        if self.settings.timing == "release_profiler_sum":
            answer = sess.proc.request(self.settings.request_timeout_s, op="kernels", set=ks[0], profiler_sum=True)
            if not answer.get("ok"):
                raise _CandidateFailed(f"profiling failed: {answer.get('error')}", answer.get("traceback", ""))
            sess.violations += answer.get("violations", [])
            from cuda_agent.schemas.result import Timing

            result.timing = Timing(median_ms=float(answer["profiler_sum_ms"]), samples=10, method="profiler_sum")
        else:
            walls: list[float] = []

            def batch() -> list[float]:
                samples, wall_ms = self.time_candidate(sess, ks, max_checks=self.settings.spot_check_max)
                walls.append(wall_ms)
                return samples

            samples = batch()
            if sess.errors or sess.violations:
                return
            samples = self.settle_fresh_sets(sess, samples, batch)
            if sess.errors or sess.violations:
                return
            result.timing = summarize(samples, method_id(self.kind, self.net_overhead), wall_ms=sum(walls))
        if self.kind == "cuda" and self.settings.per_kernel_breakdown:
            t = time.perf_counter()
            answer = sess.proc.request(self.settings.request_timeout_s, op="kernels", set=ks[0], breakdown=True)
            if answer.get("ok"):
                result.timing.per_kernel = answer.get("per_kernel", [])
                sess.violations += answer.get("violations", [])
            sess.tick("kernel_breakdown", t)
        t = time.perf_counter()
        baselines, cached = cached_baselines(
            sess.ref,
            code_hash=sess.task.code_hash,
            device_name=prov.device,
            torch_version=prov.torch,
            sets=ks,
            settings=self.settings,
            lock=self.lock,
            cache=self.cache,
            method=method_id(self.kind, self.net_overhead),
        )
        sess.tick("baselines", t)
        sess.extra["baselines_cached"] = cached
        result.baselines = baselines
        self.apply_speedups(sess, result)

    def apply_speedups(self, sess: _Session, result: CandidateResult) -> None:
        """speedup = t_baseline / t_candidate on medians, after the speed-of-light cap (T22)."""
        if result.timing is None or result.baselines is None:
            return
        t = result.timing.median_ms
        floor = speed_of_light_ms(sess.task.flops, sess.task.bytes_moved, self.provenance().device) if self.settings.speed_of_light else None
        if floor is not None and t < floor:
            sess.flags.append("speed_of_light_capped")
            sess.extra["speed_of_light_ms"] = floor
            t = floor
        if result.baselines.eager:
            result.speedup_eager = result.baselines.eager.median_ms / t if t > 0 else None
        if result.baselines.compile:
            result.speedup_compile = result.baselines.compile.median_ms / t if t > 0 else None

    def close_checks(self, sess: _Session) -> None:
        """After the calls: guard snapshot, pristine inputs intact (T5/T10/T16)."""
        t = time.perf_counter()
        answer = sess.proc.request(self.settings.call_timeout_s, op="guard")
        if answer.get("ok"):
            sess.violations += answer.get("violations", [])
        changed = sess.ref.call("inputs_intact")
        if changed:
            sess.violations.append(
                {"rule": "T5.outside.pristine_inputs_changed", "message": f"the trusted copies of input sets {changed} changed"}
            )
        sess.tick("close_checks", t)

    def _finish(
        self,
        result: CandidateResult,
        start: float,
        *,
        sess: _Session | None = None,
        status: Status | None = None,
        message: str = "",
        output: str = "",
        tb: str = "",
        root: Path | None = None,
        before: dict[str, str] | None = None,
    ) -> CandidateResult:
        """Fold what the session found into the result (rejections outrank failures)."""
        violations = list(sess.violations) if sess else []
        if root is not None and before is not None and workspace_digest(root) != before:
            violations.append({"rule": "T23.outside.workspace_modified", "message": "the candidate changed files in the workspace"})
        if sess:
            result.errors = sess.errors
            result.flags = list(dict.fromkeys(result.flags + sess.flags))
            result.seeds = sess.seeds
            result.extra.update(sess.extra)
        if output:
            result.extra["output_tail"] = output
        if tb:
            result.extra["traceback"] = tb[-3000:]
        if violations:
            first = violations[0]
            result.status = Status.rejected
            result.rule = str(first.get("rule"))
            result.message = "; ".join(f"[{v.get('rule')}] {v.get('message')}" for v in violations[:5])
            result.errors = [CheckError(check=str(v.get("rule")), message=str(v.get("message"))) for v in violations] + result.errors
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
            n = len(sess.seeds) if sess else 0
            result.message = f"outputs match the reference on {n} input sets"
        result.duration_s = time.monotonic() - start
        result.provenance = self.provenance()
        return result
