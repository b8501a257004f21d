"""Shared adapter of the ``cpu`` and ``cuda`` backends over the harness.

``compile`` = :func:`cuda_agent.harness.build.build_extension` (compiler errors
first), then the integrity source and binary rules -> ``CandidateResult(phase="compile")``.
``verify``/``profile`` rebuild incrementally (a no-op when nothing changed,
so they always evaluate the current sources) and delegate to
:class:`cuda_agent.harness.evaluator.Evaluator` with that build; ``grade``
rebuilds from scratch in a fresh build folder. Builds are tracked per
workspace root.
"""

from __future__ import annotations

import platform
import shutil
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from cuda_agent.harness.build import BuildOutcome, build_extension, default_cache_dir
from cuda_agent.harness.layout import KERNEL_SUFFIX, write_layout
from cuda_agent.harness import ExperimentSettings, HarnessSettings, usable_cpus
from cuda_agent.harness.tasks import scaled_for_backend
from cuda_agent.protocols import Workspace
from cuda_agent.schemas.result import BuildInfo, CandidateResult, CheckError, Diagnostics, Status
from cuda_agent.schemas.task import TaskManifest


class KernelBackendConfig(BaseModel):
    """Configuration block ``plugins.cpu`` / ``plugins.cuda`` of a run."""

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
    device_index: int = Field(0, ge=0, description="CUDA device ordinal (cuda backend).")
    cpu_sizes: bool = Field(
        True, description="Evaluate tasks at their CPU_SIZES variant when they define one (cpu backend)."
    )
    harness: HarnessSettings = Field(default_factory=HarnessSettings, description="Verification/timing/sandbox settings.")


def _integrity() -> Any:
    """The integrity module's static and binary checks. A failure to import them is a harness error, never a build
    that goes unchecked."""
    from cuda_agent.harness import integrity

    return integrity


def _violation_result(task: TaskManifest, phase: str, violations: list[Any], started: float) -> CandidateResult:
    first = violations[0]
    errors = [
        CheckError(
            check=v.rule,
            message=(f"{v.file}:{v.line}: " if v.file and v.line else f"{v.file}: " if v.file else "") + v.message,
            details={"file": v.file, "line": v.line},
        )
        for v in violations
    ]
    return CandidateResult(
        task_id=task.id,
        phase=phase,  # type: ignore[arg-type]
        status=Status.rejected,
        rule=first.rule,
        message=f"rejected by integrity rule {first.rule}: {first.message}",
        errors=errors,
        duration_s=time.perf_counter() - started,
    )


class PreparedEvaluation:
    """A built candidate waiting for its device step (:meth:`KernelBackend.build_for`)."""

    def __init__(self, phase: Literal["verify", "profile", "grade"], workspace: Workspace, task: TaskManifest,
                 cleanup: Path | None = None) -> None:
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


class KernelBackend:
    """A backend building release-layout workspaces with our ninja build and evaluating them."""

    name: str = ""
    skill: str = ""
    kind: Literal["cpu", "cuda"] = "cpu"

    def __init__(self, config: KernelBackendConfig | None = None) -> None:
        self.config = config or KernelBackendConfig()
        #: Benchmark- and test-only knobs of this backend's evaluator (never part of a run config); set before the
        #: first evaluation.
        self.experiments: ExperimentSettings | None = None
        self.kernel_suffix = KERNEL_SUFFIX[self.kind]
        self._builds: dict[Path, BuildOutcome] = {}
        self._evaluator: Any = None
        self._evaluator_lock = threading.Lock()

    # ------------------------------------------------------------------ facts
    def availability(self) -> tuple[bool, str]:  # pragma: no cover - overridden
        raise NotImplementedError

    def device_facts(self) -> dict[str, Any]:  # pragma: no cover - overridden
        raise NotImplementedError

    # ------------------------------------------------------------------ helpers
    def task_for(self, task: TaskManifest) -> TaskManifest:
        """The manifest this backend evaluates (the CPU_SIZES variant on 'cpu')."""
        if self.kind == "cpu" and self.config.cpu_sizes:
            return scaled_for_backend(task, "cpu")
        return task

    def build_dir_for(self, root: Path) -> Path:
        """The incremental build folder of workspace ``root``."""
        base = self.config.build_root or root.parent / "build"
        return base / f"{root.name}-{self.kind}"

    def evaluator(self) -> Any:
        """The evaluator of this backend (created on first use)."""
        with self._evaluator_lock:  # episodes on several threads share one backend per device
            if self._evaluator is None:
                from cuda_agent.harness.evaluator import Evaluator

                self._evaluator = Evaluator(self.kind, self.config.harness, device_index=self.config.device_index,
                                            experiments=self.experiments)
            return self._evaluator

    def warm(self, task: TaskManifest) -> None:
        """Start the task's reference process and compile its baselines (optional backend method).

        The eval runner's scheduler calls it before it takes the device slot for verify, profile or grade.
        """
        self.evaluator().prepare(self.task_for(task))

    def build(self, root: Path, build_dir: Path) -> BuildOutcome:
        """Build ``root`` into ``build_dir``; harness state is hidden from the compiler."""
        hidden = tuple(p for p in [self.config.harness.resolved_baseline_cache()] if p.is_dir())
        return build_extension(
            root,
            self.kind,
            build_dir,
            arch=self.config.arch if self.kind == "cuda" else None,
            timeout_s=self.config.compile_timeout_s,
            cache_dir=self.config.build_cache or default_cache_dir(),
            isolation=self.config.isolation,
            hidden=hidden,
        )

    # ------------------------------------------------------------------ protocol
    def prepare_workspace(self, task: TaskManifest, root: Path) -> Workspace:
        """Lay out the release workspace for ``task`` (its CPU variant on 'cpu')."""
        return write_layout(Path(root), self.task_for(task), self.kind)

    def _compile(self, root: Path, task: TaskManifest, phase: str, build_dir: Path) -> tuple[CandidateResult, BuildOutcome | None]:
        started = time.perf_counter()
        integrity = _integrity()
        # Build first: compiler errors are what the agent needs while the sources are unfinished;
        # the integrity rules then judge sources and binary together (the compiler is sandboxed).
        outcome = self.build(root, build_dir)
        diagnostics = Diagnostics(build=BuildInfo(steps=outcome.steps, seconds=round(outcome.duration_s, 3),
                                                  isolation=outcome.isolation, arch=outcome.arch))
        if not outcome.ok:
            timed_out = any("timed out" in e.message for e in outcome.errors)
            errors = [
                CheckError(
                    check="compile",
                    message=(f"{e.file}:{e.line}: " if e.file and e.line else "") + e.message,
                    details={"file": e.file, "line": e.line},
                )
                for e in outcome.errors[:20]
            ]
            result = CandidateResult(
                task_id=task.id,
                phase=phase,  # type: ignore[arg-type]
                status=Status.timeout if timed_out else Status.compile_error,
                message="compilation failed:\n" + outcome.log,
                errors=errors,
                duration_s=time.perf_counter() - started,
                isolation=outcome.isolation,
                diagnostics=diagnostics,
            )
            return result, None
        if outcome.so_path is not None:
            violations = integrity.check_sources(root, self.kind) + integrity.check_binary(outcome.so_path, self.kind)
            if violations:
                return _violation_result(task, phase, violations, started), None
        message = (
            f"compiled: {outcome.steps} translation unit(s) rebuilt in {outcome.duration_s:.2f} s"
            + (f" for {outcome.arch}" if outcome.arch else "")
            + ("\n" + outcome.log if outcome.log else "")
        )
        result = CandidateResult(
            task_id=task.id,
            phase=phase,  # type: ignore[arg-type]
            status=Status.correct,
            message=message,
            duration_s=time.perf_counter() - started,
            isolation=outcome.isolation,
            diagnostics=diagnostics,
        )
        return result, outcome

    def compile(self, workspace: Workspace, task: TaskManifest) -> CandidateResult:
        """Incremental build, then the integrity source and binary rules."""
        root = Path(workspace.root)
        task = self.task_for(task)
        result, outcome = self._compile(root, task, "compile", self.build_dir_for(root))
        if outcome is not None:
            self._builds[root] = outcome
        else:
            self._builds.pop(root, None)
        return result

    def build_for(self, phase: Literal["verify", "profile", "grade"], workspace: Workspace, task: TaskManifest) -> PreparedEvaluation:
        """The build step of ``verify``/``profile``/``grade`` alone (no device needed): an incremental rebuild of the
        workspace for verify/profile, a rebuild from scratch in a fresh folder for grade.

        The eval runner's scheduler runs it in the CPU build pool and only :meth:`evaluate_built` under the device's
        timing lock; ``verify``/``profile``/``grade`` are the two steps back to back. Always ``close()`` the result
        (it removes grade's build folder).
        """
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
        """The device step: the evaluator's verify/profile/grade on the build :meth:`build_for` made (or the build's
        failure result, without touching the device)."""
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

    def _run_phase(self, phase: Literal["verify", "profile", "grade"], workspace: Workspace, task: TaskManifest) -> CandidateResult:
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

    def last_build(self, root: Path) -> BuildOutcome | None:
        """The last successful build of workspace ``root`` (None if none or the last failed)."""
        return self._builds.get(Path(root))

    def close(self) -> None:
        """Stop the evaluator's processes."""
        if self._evaluator is not None:
            self._evaluator.close()
            self._evaluator = None


def host_facts() -> dict[str, Any]:
    """CPU model, cores, compiler, torch and Python versions."""
    import os

    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    import torch

    return {
        "cpu": model,
        "cores": usable_cpus(), "host_cores": os.cpu_count(),
        "cxx": shutil.which("c++") or shutil.which("g++"),
        "torch": torch.__version__,
        "python": platform.python_version(),
    }
