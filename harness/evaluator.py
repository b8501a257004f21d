"""The trusted evaluator: verify, profile and grade one built candidate (a facade over the harness's parts).

``Evaluator(kind, settings).verify(task, workspace_root, so_path)`` runs the candidate in a pre-started sandboxed
runner and checks it against the trusted reference process; ``profile`` adds timing in the same protocol (timed
calls on fresh inputs, spot-checked: T12/T13) and baselines; ``grade`` is the trusted final pass
(:mod:`cuda_agent.harness.grading`). Every call returns a :class:`~cuda_agent.schemas.CandidateResult` and never
raises for anything the candidate does.

The parts, one job each (docs/architecture.md): :class:`~cuda_agent.harness.reference_pool.ReferencePool` (warm
reference processes), :class:`~cuda_agent.harness.candidate_pool.CandidatePool` (runners started ahead),
:class:`~cuda_agent.harness.transport.Transport` (hand-over modes and their failure memory),
:class:`~cuda_agent.harness.session.Session` (open, call, check), :mod:`~cuda_agent.harness.timed_run` (rotation,
fresh sets, settling), the strategies :mod:`~cuda_agent.harness.phases` and :mod:`~cuda_agent.harness.grading`,
and :mod:`~cuda_agent.harness.sanitizer`.
"""

from __future__ import annotations

import platform
import secrets
import socket
import threading
from pathlib import Path

import structlog

from cuda_agent.harness._affinity import timing_cpus
from cuda_agent.harness.baselines import BaselineCache
from cuda_agent.harness.candidate_pool import CandidatePool
from cuda_agent.harness.experiments import ExperimentSettings
from cuda_agent.harness.memory_budget import clamped_capacity
from cuda_agent.harness.memory_plan import MemoryPlanner
from cuda_agent.harness.phases import profile_body, verify_body
from cuda_agent.harness.reference_client import ReferenceClient
from cuda_agent.harness.reference_pool import ReferencePool
from cuda_agent.harness.reference_sets import ReferenceError_
from cuda_agent.harness.sandbox import RunnerOptions
from cuda_agent.harness.sanitizer import require_sanitizers, sanitize_graded, sanitizer_gate
from cuda_agent.harness.session import SessionContext
from cuda_agent.harness.session_run import Strategy, build_key, is_out_of_memory, run_session, workspace_digest
from cuda_agent.harness.settings import HarnessSettings, IntegritySettings
from cuda_agent.harness.timing_protocol import resolve_protocol
from cuda_agent.harness.timing_stats import device_timing_lock
from cuda_agent.harness.transport import Transport
from cuda_agent.schemas.result import CandidateResult, Provenance
from cuda_agent.schemas.task import TaskManifest

log = structlog.get_logger(__name__)

#: How many verified builds an evaluator remembers (a profile right after verify re-checks fewer sets).
VERIFIED_MEMORY = 64


class Evaluator:
    """Verifies, profiles and grades candidates of one backend on one device.

    :param kind: the device kind its candidates run on, one of
        :data:`~cuda_agent.harness.device_adapter.DEVICE_KINDS` ('cpu', 'cuda').
    :param settings: the public harness settings (defaults when None).
    :param device_index: CUDA device ordinal (ignored on CPU).
    :param experiments: benchmark- and test-only knobs (:class:`~cuda_agent.harness.experiments.ExperimentSettings`).
    :param backend: the backend's registered name, recorded in every result's provenance (default: ``kind``).
    :param runner_loader: the backend's RunnerLoader, ``"module:Class"`` (harness/device_adapter.py); None = the
        built ``cuda_extension`` of the ``cpu``/``cuda`` backends.
    """

    def __init__(self, kind: str, settings: HarnessSettings | None = None, device_index: int = 0,
                 experiments: ExperimentSettings | None = None, *, backend: str | None = None,
                 runner_loader: str | None = None) -> None:
        from cuda_agent.harness.device_adapter import DEVICE_KINDS

        if kind not in DEVICE_KINDS:
            raise ValueError(f"Evaluator: device kind {kind!r} is not valid; valid: {', '.join(DEVICE_KINDS)}")
        self.kind = kind
        self.backend_name = backend or kind
        self.runner_loader = runner_loader
        self.settings = settings or HarnessSettings()
        self.experiments = experiments or ExperimentSettings()
        self.protocol = resolve_protocol(self.settings.timing.preset, kind, self.experiments.timing)
        if kind == "cuda" and self.protocol.net_overhead and not self.protocol.timer.preroll_us:
            # Seen in a GPU test that built its protocol without a spin: every calibration read 22-34 us.
            raise ValueError("net_overhead needs a pre-roll spin (timer.preroll_us > 0): without one a null call's "
                             "time is the host's launch latency (22-34 us on the H200), over the 20 us limit of a "
                             "cost that is subtracted, so nothing would be netted")
        require_sanitizers(self.settings.integrity, kind)  # requested but unavailable: a harness error
        self.device = "cpu" if kind == "cpu" else f"cuda:{device_index}"
        # On CPU every slot is the one machine: one timing lock (the ``cpu0`` the scheduler's device steps hold
        # shared) and one memory budget. A slot index here once gave CPU slot 1 its own lock (``cpu1``), so two
        # slots timed at once on the same cores, and a step holding ``cpu0`` deadlocked against it in CI.
        self.device_index = device_index if kind != "cpu" else 0
        self.lock = device_timing_lock(kind, self.device_index)
        self.cache = BaselineCache(self.settings.resolved_baseline_cache())
        self.transport = Transport(kind, self.experiments.cuda_transport, self.experiments.fresh_set_transport)
        self._cpus = timing_cpus(self.device, self.experiments.timing_cpus)
        gib = self.settings.limits.device_memory_gib
        #: Input sets sized to the device's memory: one budget per device for the whole run (memory_plan.py).
        self.memory = MemoryPlanner(kind, self.device_index,
                                    clamped_capacity(kind, int(gib * 2**30), self.device_index) if gib else None)
        self.references = ReferencePool(self._spawn_reference, init_seed=self.experiments.init_seed,
                                        warm_limit=self.experiments.warm_references,
                                        spares=self.experiments.spares(kind), on_start=self._hold_process)
        self.memory.on_pressure(self.references.close_idle)
        self._pools: dict[str, CandidatePool] = {}
        self._pools_lock = threading.Lock()
        self._cleanups: list[threading.Thread] = []  # finished sessions' set drops still running
        tools_pool = self._pool(self.settings.integrity.isolation)
        self.isolation = tools_pool.isolation
        self._provenance: Provenance | None = None
        #: Seeds of every evaluation so far; the grading pass never reuses one.
        self.used_seeds: set[int] = set()
        self._verified: dict[str, None] = {}  # builds that passed verify or profile here, oldest first

    # ------------------------------------------------------------------ the three evaluations
    def verify(self, task: TaskManifest, workspace_root: Path, so_path: Path | None) -> CandidateResult:
        """Phase 'verify': N input sets from secret seeds, every check; no timing."""
        return self._evaluate("verify", task, Path(workspace_root), so_path)

    def profile(self, task: TaskManifest, workspace_root: Path, so_path: Path | None) -> CandidateResult:
        """Phase 'profile': verify, then time (spot-checked) and compare with cached baselines."""
        return self._evaluate("profile", task, Path(workspace_root), so_path)

    def grade(self, task: TaskManifest, workspace_root: Path, so_path: Path | None) -> CandidateResult:
        """Phase 'grade': the trusted final pass (fresh seeds and process, default integrity, ABAB timing)."""
        from cuda_agent.harness.grading import grade

        result = grade(self, task, Path(workspace_root), so_path)
        # integrity.grade_sanitizer: memcheck (and racecheck) on one fresh set of a solution that graded correct
        return sanitize_graded(self, task, Path(workspace_root), so_path, result)

    def _evaluate(self, phase: str, task: TaskManifest, root: Path, so_path: Path | None) -> CandidateResult:
        timing = phase == "profile"
        before = workspace_digest(root)
        key = build_key(task, before, so_path)
        seeds = None
        if timing and key in self._verified:  # verify just passed on this exact build: check fewer sets first
            n = min(self.protocol.reverify_sets, self.settings.verify.input_sets)
            seeds = [secrets.randbits(31) for _ in range(n)]
        body: Strategy = profile_body(self) if timing else verify_body
        result = self.run_session(phase, task, root, so_path, body, seeds=seeds, before=before, timing=timing)
        if seeds is not None:
            result.diagnostics.reverified_sets = len(seeds)
        if result.passed:
            self._verified[key] = None
            while len(self._verified) > VERIFIED_MEMORY:
                self._verified.pop(next(iter(self._verified)))
        else:
            self._verified.pop(key, None)
        if result.passed and not timing and self.settings.integrity.sanitizer != "off":
            result = sanitizer_gate(self, task, root, so_path, result)
        return result

    def run_session(self, phase: str, task: TaskManifest, root: Path, so_path: Path | None, body: Strategy, *,
                    seeds: list[int] | None = None, before: dict[str, str] | None = None,
                    timing: bool = False, torch_compute_allowed: bool = False) -> CandidateResult:
        """One evaluation of ``phase`` running strategy ``body`` (:func:`~cuda_agent.harness.session_run.run_session`)."""
        return run_session(self, phase, task, root, so_path, body, seeds=seeds, before=before, timing=timing,
                           torch_compute_allowed=torch_compute_allowed)

    # ------------------------------------------------------------------ parts
    def integrity(self, phase: str) -> IntegritySettings:
        """The integrity block of ``phase``: the settings' own for the tools, the defaults (or stricter) for grade."""
        block = self.settings.integrity
        return block.for_grading() if phase == "grade" else block

    def context(self, phase: str) -> SessionContext:
        """What the sessions of ``phase`` share."""
        return SessionContext(kind=self.kind, device=self.device, settings=self.settings, protocol=self.protocol,
                              integrity=self.integrity(phase), transport=self.transport, lock=self.lock,
                              input_transport=self.experiments.input_transport, init_seed=self.experiments.init_seed,
                              net_overhead=self.protocol.net_overhead and self.kind == "cuda")

    def runners(self, phase: str) -> CandidatePool:
        """The runners of ``phase`` (grading gets its own pool when its isolation is stricter than the tools')."""
        return self._pool(self.integrity(phase).isolation)

    def _pool(self, isolation: str) -> CandidatePool:
        with self._pools_lock:
            pool = self._pools.get(isolation)
            if pool is None:
                s, x = self.settings, self.experiments
                options = RunnerOptions(
                    device=self.device, isolation=isolation, cpu_threads=s.sandbox.cpu_threads,
                    timer=self.protocol.timer, memory_mb=s.limits.memory_mb, gpu_memory_mb=s.limits.gpu_memory_mb,
                    startup_timeout_s=s.limits.startup_timeout_s, watchdog_interval_s=x.watchdog_interval_s,
                    output_log_limit=x.output_log_limit, cuda_transport=x.cuda_transport, unshare_pid=x.unshare_pid,
                    sandbox_uid=x.sandbox_uid, bwrap_path=x.bwrap_path, cpus=self._cpus,
                    scratch_dir=s.sandbox.scratch_dir, loader=self.runner_loader)
                pool = self._pools[isolation] = CandidatePool(options, self.settings.runners_ahead())
            return pool

    def _spawn_reference(self) -> ReferenceClient:
        """A reference process started now without its task (it imports torch meanwhile)."""
        return ReferenceClient(
            self.device, threads=self.settings.sandbox.cpu_threads, timer=self.protocol.timer,
            clone_inputs=self.protocol.baseline_clone_inputs, net_overhead=self.protocol.net_overhead and self.kind == "cuda",
            compile_threads=self.experiments.reference_compile_threads,
            preimport_compile=self._warm_compile(), cpus=self._cpus, timing_lock=self.lock)

    def _warm_compile(self) -> bool:
        """Whether a reference process compiles the torch.compile baseline at its warm-up (``timing.warm_compile``)."""
        return self.settings.timing.compile_baseline and self.settings.timing.warm_compile

    def _hold_process(self, task: TaskManifest, ref: ReferenceClient) -> None:
        """A reference process of ``task`` holds its context and parameters in the budget until it closes."""
        ref.hold_bytes = self.memory.process_bytes(task)
        ref.on_close = self.memory.hold_process(task)

    def self_check(self, task: TaskManifest) -> CandidateResult:
        """The suite self-check of ``task`` (``cuda-agent tasks check``): its own ``Model`` graded as the
        candidate, with every check of a grade except the rules against PyTorch compute; never a grade."""
        from cuda_agent.harness.grading import self_check

        return self_check(self, task)

    def warm_reference(self, task: TaskManifest) -> ReferenceClient | None:
        """``task``'s reference process if one is warm and alive now, else None; starts nothing (diagnostics)."""
        return self.references.warm(task)

    def prepare(self, task: TaskManifest) -> bool:
        """Start ``task``'s reference process and warm its baselines (torch.compile included) now, before a caller
        takes a device slot (the eval runner's scheduler does). Idempotent per process; True when it did work. An
        out-of-memory error of the reference process (other work beside it took more than was reserved) gets one
        retry holding the device alone before it is raised."""
        warm = self.references.warm(task)
        if warm is not None and warm.warmed:
            return False
        try:
            return self._warm_baselines(task, exclusive=False)
        except ReferenceError_ as exc:
            if not is_out_of_memory(str(exc)):
                raise
            log.warning("warm_up.oom_retry", task=task.id, error=str(exc)[:300])
        return self._warm_baselines(task, exclusive=True)

    def _warm_baselines(self, task: TaskManifest, *, exclusive: bool) -> bool:
        """:meth:`prepare`'s work inside its reservation (``exclusive``: the device alone). The reservation comes
        before the process: one that waits behind a retry holding the device alone must hold no process's memory."""
        with self.memory.warm_up(task, exclusive=exclusive):  # one set's worth, beside whatever sessions hold
            ref = self.references.acquire(task)
            try:
                if ref.warmed:
                    return False
                try:
                    # The process holds the timing lock around its device work itself (not while it compiles).
                    ref.warm_baselines(self.settings.timing.compile_mode, self._warm_compile(),
                                       self.lock.path_for_child())
                except ReferenceError_:
                    self.references.retire(task, ref)  # a process that failed a request is never used again
                    raise
                self.references.mark_warmed(ref)  # idle until its session: closed last under memory pressure
                return True
            finally:
                self.references.release(ref)

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
                except Exception:  # noqa: BLE001 - no NVML: the driver stays unrecorded
                    pass
            self._provenance = Provenance(backend=self.backend_name, device=str(device), driver=str(driver) if driver else None,
                                          cuda=torch.version.cuda, torch=torch.__version__,
                                          python=platform.python_version(), package_version=str(version),
                                          host=socket.gethostname())
        return self._provenance

    # ------------------------------------------------------------------ ending
    def track_cleanup(self, thread: threading.Thread) -> None:
        """A finished session's cleanup thread (its sets' drop), which :meth:`close` waits for."""
        with self._pools_lock:
            self._cleanups = [t for t in self._cleanups if t.is_alive()] + [thread]

    def wait_cleanups(self, timeout_s: float = 120.0) -> None:
        """Wait for the finished sessions' cleanups (their sets' drops, their memory reservations' end)."""
        with self._pools_lock:
            cleanups, self._cleanups = list(self._cleanups), []
        for thread in cleanups:
            thread.join(timeout=timeout_s)

    def close(self) -> None:
        """Stop the runners and the reference processes (all reference processes at once), after the finished
        sessions' cleanups (their sets' drops) are done."""
        self.wait_cleanups()
        with self._pools_lock:
            pools, self._pools = list(self._pools.values()), {}
        for pool in pools:
            pool.close()
        self.references.close()

    def __enter__(self) -> Evaluator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
