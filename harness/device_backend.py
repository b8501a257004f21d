"""A complete backend over a :class:`~cuda_agent.harness.device_adapter.DeviceAdapter` (docs/backends.md).

:class:`DeviceBackend` implements :class:`cuda_agent.protocols.Backend` (and the split and warm-up protocols the
eval scheduler uses) once for every kernel language: ``compile`` = the adapter's build, then its static source and
binary rules -> ``CandidateResult(phase="compile")``; ``verify``/``profile`` rebuild incrementally (a no-op when
nothing changed) and hand the build to the harness's :class:`~cuda_agent.harness.evaluator.Evaluator`; ``grade``
rebuilds from scratch in a fresh folder and runs the trusted grading pass. A backend is a subclass naming its
adapter::

    class TritonBackend(DeviceBackend):
        adapter = TritonAdapter()

and is registered with ``register("triton", TritonBackend, config_model=BackendConfig)``.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from cuda_agent.harness.build import BuildOutcome
from cuda_agent.harness.experiments import ExperimentSettings
from cuda_agent.harness.settings import HarnessSettings
from cuda_agent.protocols import Workspace
from cuda_agent.schemas.result import BuildInfo, CandidateResult, CheckError, Diagnostics, Status
from cuda_agent.schemas.task import TaskManifest

Phase = Literal["verify", "profile", "grade"]


class BackendConfig(BaseModel):
    """Configuration block ``plugins.<backend>`` of a run (every :class:`DeviceBackend` reads it)."""

    model_config = ConfigDict(extra="forbid")

    build_root: Path | None = Field(
        None, description="Folder of per-workspace build folders; None = '<workspace>/../build'."
    )
    build_cache: Path | None = Field(
        None, description="Shared cache of the prebuilt binding object; None = $CUDA_AGENT_BUILD_CACHE or ~/.cache/cuda-agent/build."
    )
    arch: str | None = Field(None, description="CUDA arch to build for ('sm_90a'); None = the device's (cuda backend only).")
    compile_timeout_s: float = Field(300.0, gt=0, description="Wall-clock limit of one compile, seconds.")
    isolation: Literal["auto", "bwrap", "process"] = Field(
        "auto", description="Compiler sandbox: 'auto' (bubblewrap when usable), 'bwrap' (required), 'process'."
    )
    device_index: int = Field(0, ge=0, description="CUDA device ordinal (backends on a CUDA device).")
    cpu_sizes: bool = Field(
        True, description="Evaluate tasks at their CPU_SIZES variant when they define one (backends on the CPU)."
    )
    harness: HarnessSettings = Field(default_factory=HarnessSettings, description="Verification/timing/sandbox settings.")


def violation_result(task: TaskManifest, phase: str, violations: list[Any], started: float) -> CandidateResult:
    """A ``rejected`` result naming the first broken rule, every violation in ``errors``."""
    first = violations[0]
    errors = [
        CheckError(
            check=v.rule,
            message=(f"{v.file}:{v.line}: " if v.file and v.line else f"{v.file}: " if v.file else "") + v.message,
            details={"file": v.file, "line": v.line},
        )
        for v in violations
    ]
    return CandidateResult(task_id=task.id, phase=phase, status=Status.rejected, rule=first.rule,  # type: ignore[arg-type]
                           message=f"rejected by integrity rule {first.rule}: {first.message}", errors=errors,
                           duration_s=time.perf_counter() - started)


def build_failure(task: TaskManifest, phase: str, outcome: BuildOutcome, diagnostics: Diagnostics,
                  started: float) -> CandidateResult:
    """The result of a build that failed: ``compile_error`` (or ``timeout``) with the located errors."""
    timed_out = any("timed out" in e.message for e in outcome.errors)
    errors = [CheckError(check="compile", message=(f"{e.file}:{e.line}: " if e.file and e.line else "") + e.message,
                         details={"file": e.file, "line": e.line}) for e in outcome.errors[:20]]
    return CandidateResult(task_id=task.id, phase=phase,  # type: ignore[arg-type]
                           status=Status.timeout if timed_out else Status.compile_error,
                           message="compilation failed:\n" + outcome.log, errors=errors,
                           duration_s=time.perf_counter() - started, isolation=outcome.isolation,
                           diagnostics=diagnostics)


class PreparedEvaluation:
    """A built candidate waiting for its device step (:meth:`DeviceBackend.build_for`)."""

    def __init__(self, phase: Phase, workspace: Workspace, task: TaskManifest, cleanup: Path | None = None) -> None:
        self.phase = phase
        self.workspace = workspace
        self.task = task
        self.compiled: CandidateResult | None = None  # the build's result (its failure result when outcome is None)
        self.outcome: BuildOutcome | None = None
        self._cleanup = cleanup

    def close(self) -> None:
        """Remove a build folder made only for this evaluation (grade's)."""
        if self._cleanup is not None:
            shutil.rmtree(self._cleanup, ignore_errors=True)
            self._cleanup = None


class DeviceBackend:
    """A backend of one kernel language on one device, everything but the language from the harness.

    :param config: the validated block ``plugins.<name>`` (defaults when None).
    """

    #: The language's adapter (a subclass sets it).
    adapter: ClassVar[Any] = None

    def __init__(self, config: BackendConfig | None = None) -> None:
        if self.adapter is None:
            raise TypeError(f"{type(self).__name__} sets no adapter; subclass DeviceBackend with `adapter = MyAdapter()`")
        from cuda_agent.harness.device_adapter import adapter_problems

        problems = adapter_problems(self.adapter)
        if problems:
            raise TypeError(f"{type(self).__name__}.adapter is not a DeviceAdapter (docs/backends.md): "
                            + "; ".join(problems))
        self.config = config or BackendConfig()
        #: Benchmark- and test-only knobs of this backend's evaluator (never part of a run config); set before the
        #: first evaluation.
        self.experiments: ExperimentSettings | None = None
        self._builds: dict[Path, BuildOutcome] = {}
        self._evaluator: Any = None
        self._evaluator_lock = threading.Lock()

    # ------------------------------------------------------------------ facts (the adapter's)
    @property
    def name(self) -> str:
        """The registered backend name."""
        return str(self.adapter.name)

    @property
    def skill(self) -> str:
        """Its skill document's name."""
        return str(self.adapter.skill)

    @property
    def kernel_suffix(self) -> str:
        """Suffix of the kernel sources the agent writes."""
        return str(self.adapter.kernel_suffix)

    @property
    def kind(self) -> str:
        """The device kind its candidates run on ('cpu', 'cuda')."""
        return str(self.adapter.device_kind)

    def availability(self) -> tuple[bool, str]:
        """(usable here, reason), from the adapter."""
        return self.adapter.availability(self.config)

    def device_facts(self) -> dict[str, Any]:
        """Device and toolchain facts, from the adapter."""
        return {"backend": self.name, **self.adapter.device_facts(self.config)}

    # ------------------------------------------------------------------ helpers
    def task_for(self, task: TaskManifest) -> TaskManifest:
        """The manifest this backend evaluates (the adapter's choice, e.g. the CPU_SIZES variant on a CPU)."""
        return self.adapter.task_for(task, self.config)

    def build_dir_for(self, root: Path) -> Path:
        """The incremental build folder of workspace ``root``."""
        base = self.config.build_root or root.parent / "build"
        return base / f"{root.name}-{self.name}"

    def evaluator(self) -> Any:
        """The evaluator of this backend (created on first use)."""
        with self._evaluator_lock:  # episodes on several threads share one backend per device
            if self._evaluator is None:
                from cuda_agent.harness.evaluator import Evaluator

                self._evaluator = Evaluator(self.kind, self.config.harness, device_index=self.config.device_index,
                                            experiments=self.experiments, backend=self.name,
                                            runner_loader=self.adapter.runner_loader)
            return self._evaluator

    def warm(self, task: TaskManifest) -> None:
        """Start the task's reference process and compile its baselines (the eval scheduler calls it before it
        takes the device slot)."""
        self.evaluator().prepare(self.task_for(task))

    def build(self, root: Path, build_dir: Path) -> BuildOutcome:
        """The adapter's build of ``root`` into ``build_dir``; harness state is hidden from a sandboxed compiler."""
        hidden = tuple(p for p in [self.config.harness.resolved_baseline_cache()] if p.is_dir())
        return self.adapter.build(Path(root), Path(build_dir), self.config, hidden)

    # ------------------------------------------------------------------ protocol
    def prepare_workspace(self, task: TaskManifest, root: Path) -> Workspace:
        """The adapter's layout for ``task`` (its variant for this backend)."""
        return self.adapter.layout(self.task_for(task), Path(root))

    def _compile(self, root: Path, task: TaskManifest, phase: str, build_dir: Path) -> tuple[CandidateResult, BuildOutcome | None]:
        started = time.perf_counter()
        # Build first: compiler errors are what the agent needs while the sources are unfinished; the integrity
        # rules then judge sources and artefact together (the compiler is sandboxed).
        outcome = self.build(root, build_dir)
        diagnostics = Diagnostics(build=BuildInfo(steps=outcome.steps, seconds=round(outcome.duration_s, 3),
                                                  isolation=outcome.isolation, arch=outcome.arch))
        if not outcome.ok:
            return build_failure(task, phase, outcome, diagnostics, started), None
        violations = self.adapter.check_sources(root) + self.adapter.check_binary(outcome)
        if violations:
            return violation_result(task, phase, violations, started), None
        if outcome.so_path is None:  # nothing built ahead (a JIT language): what the adapter's check said
            message = f"checked in {outcome.duration_s:.2f} s" + (f": {outcome.log}" if outcome.log else "")
        else:
            message = (f"compiled: {outcome.steps} translation unit(s) rebuilt in {outcome.duration_s:.2f} s"
                       + (f" for {outcome.arch}" if outcome.arch else "") + ("\n" + outcome.log if outcome.log else ""))
        return CandidateResult(task_id=task.id, phase=phase, status=Status.correct, message=message,  # type: ignore[arg-type]
                               duration_s=time.perf_counter() - started, isolation=outcome.isolation,
                               diagnostics=diagnostics), outcome

    def compile(self, workspace: Workspace, task: TaskManifest) -> CandidateResult:
        """Incremental build, then the integrity source and binary rules."""
        root = Path(workspace.root)
        result, outcome = self._compile(root, self.task_for(task), "compile", self.build_dir_for(root))
        if outcome is not None:
            self._builds[root] = outcome
        else:
            self._builds.pop(root, None)
        return result

    def build_for(self, phase: Phase, workspace: Workspace, task: TaskManifest) -> PreparedEvaluation:
        """The build step of ``verify``/``profile``/``grade`` alone (no device): incremental for verify/profile,
        from scratch in a fresh folder for grade. Always ``close()`` the result (it removes grade's folder)."""
        root = Path(workspace.root)
        task = self.task_for(task)
        if phase == "grade":
            base = self.config.build_root or Path(tempfile.gettempdir()) / "cuda-agent-grade"
            build_dir = base / f"grade-{uuid.uuid4().hex[:12]}"
            prepared = PreparedEvaluation(phase, workspace, task, cleanup=build_dir)
        else:
            build_dir = self.build_dir_for(root)
            prepared = PreparedEvaluation(phase, workspace, task)
        try:
            compiled, outcome = self._compile(root, task, phase, build_dir)
        except BaseException:
            prepared.close()
            raise
        prepared.compiled, prepared.outcome = compiled, outcome
        if phase != "grade":
            if outcome is None:
                self._builds.pop(root, None)
            else:
                self._builds[root] = outcome
        return prepared

    def evaluate_built(self, prepared: PreparedEvaluation) -> CandidateResult:
        """The device step: the evaluator's verify/profile/grade on the build :meth:`build_for` made (or the
        build's failure result, without touching the device)."""
        if prepared.outcome is None:
            assert prepared.compiled is not None
            return prepared.compiled
        evaluator = self.evaluator()
        root = Path(prepared.workspace.root)
        run = {"verify": evaluator.verify, "profile": evaluator.profile, "grade": evaluator.grade}[prepared.phase]
        result = run(prepared.task, root, prepared.outcome.so_path)
        result.diagnostics.build_s = round(prepared.compiled.duration_s, 3) if prepared.compiled else None
        if prepared.phase != "grade" and result.snapshot_id is None:
            try:
                result = result.model_copy(update={"snapshot_id": prepared.workspace.snapshot()})
            except Exception:  # a workspace without a store: the record stays without an id
                pass
        return result

    def _run_phase(self, phase: Phase, workspace: Workspace, task: TaskManifest) -> CandidateResult:
        prepared = self.build_for(phase, workspace, task)
        try:
            return self.evaluate_built(prepared)
        finally:
            prepared.close()

    def verify(self, workspace: Workspace, task: TaskManifest) -> CandidateResult:
        """Rebuild if needed, then verify with the evaluator (N input sets, every check)."""
        return self._run_phase("verify", workspace, task)

    def profile(self, workspace: Workspace, task: TaskManifest) -> CandidateResult:
        """Rebuild if needed, then verify + time against cached baselines."""
        return self._run_phase("profile", workspace, task)

    def grade(self, workspace: Workspace, task: TaskManifest) -> CandidateResult:
        """Trusted final pass: rebuild from scratch in a fresh folder, then the evaluator's grade."""
        return self._run_phase("grade", workspace, task)

    def grade_single_file(self, source: Path, root: Path, task: TaskManifest) -> CandidateResult:
        """Grade a KernelBench single-file solution (``cuda-agent score``): the adapter's static checks of the
        file, then the file as ``model_new.py`` beside the task's ``model.py``, graded with no build of ours."""
        from cuda_agent.harness.single_file_grading import grade_single_file

        return grade_single_file(self, Path(source), Path(root), self.task_for(task))

    def counters(self, workspace: Workspace, task: TaskManifest, *, time_limit_s: float, max_kernels: int = 4) -> Any:
        """Nsight Compute counters of the candidate's own kernels on one input set
        (:func:`~cuda_agent.harness.ncu_profile.profile_counters`): a list of kernels, or the build's failure
        result when the workspace does not build. Raises :class:`~cuda_agent.harness.ncu_profile.NcuRefused`."""
        from cuda_agent.harness.ncu_profile import NcuRefused, profile_counters

        if self.kind != "cuda":  # before any build: nothing to profile here
            raise NcuRefused(f"ncu reads NVIDIA GPU counters; backend {self.name!r} runs its kernels on {self.kind}")
        prepared = self.build_for("verify", workspace, task)
        try:
            if prepared.outcome is None:
                return prepared.compiled
            root = Path(workspace.root)
            names = self.adapter.kernel_names(root, prepared.outcome)
            return profile_counters(self.evaluator(), prepared.task, root, prepared.outcome.so_path, names,
                                    time_limit_s=time_limit_s, max_kernels=max_kernels)
        finally:
            prepared.close()

    def last_build(self, root: Path) -> BuildOutcome | None:
        """The last successful build of workspace ``root`` (None if none or the last failed)."""
        return self._builds.get(Path(root))

    def close(self) -> None:
        """Stop the evaluator's processes."""
        if self._evaluator is not None:
            self._evaluator.close()
            self._evaluator = None
