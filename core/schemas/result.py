"""CandidateResult: the one record every consumer of an evaluation reads.

The compile/verify/profile tools, the trusted grading pass, ``score``,
``result.json``, evaluation metrics, rewards and data filters all read and
write this record; nothing else carries verdicts.
"""

from __future__ import annotations

from enum import Enum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from cuda_agent import INTERFACES_VERSION


class Status(str, Enum):
    """Outcome of evaluating a candidate."""

    correct = "correct"
    incorrect = "incorrect"
    compile_error = "compile_error"
    rejected = "rejected"  # an integrity rule fired; ``rule`` names it
    error = "error"  # the candidate crashed, or the harness could not evaluate it
    timeout = "timeout"


class CheckError(BaseModel):
    """One failed check, phrased so the agent can act on it."""

    model_config = ConfigDict(extra="forbid")

    check: str = Field(description="Check id, e.g. 'shape', 'dtype', 'tolerance', 'nan', 'alias', or a rule id.")
    message: str = Field(description="What was expected and what was found.")
    input_set: int | None = Field(None, description="Index of the input set it failed on, if any.")
    output: int | None = Field(None, description="Index of the output it concerns, if any.")
    details: dict[str, Any] = Field(default_factory=dict, description="Numbers behind the message (max abs err...).")


class Timing(BaseModel):
    """A timed quantity with its dispersion and the method that produced it."""

    model_config = ConfigDict(extra="forbid")

    median_ms: float = Field(description="Median of per-call times, milliseconds.")
    mean_ms: float | None = Field(None, description="Mean of per-call times.")
    min_ms: float | None = Field(None, description="Fastest call.")
    max_ms: float | None = Field(None, description="Slowest call.")
    iqr_ms: float | None = Field(None, description="Inter-quartile range of per-call times.")
    rel_ci: float | None = Field(None, description="Relative half-width of the median's confidence interval.")
    samples: int = Field(0, description="Number of timed calls.")
    method: str = Field(description="Timing method id, e.g. 'events_l2flush' (ours) or 'profiler_sum' (release).")
    wall_ms: float | None = Field(None, description="Parent's wall clock around the timed batch (cross-check).")
    per_kernel: list[dict[str, Any]] = Field(default_factory=list, description="Per-kernel breakdown (name, ms, calls).")


class Baselines(BaseModel):
    """Baseline timings on the same machine, with the ids of their cache entries."""

    model_config = ConfigDict(extra="forbid")

    eager: Timing | None = Field(None, description="Eager PyTorch reference.")
    compile: Timing | None = Field(None, description="torch.compile of the reference.")
    compile_mode: str = Field("default", description="torch.compile mode used for the compile baseline.")
    ids: dict[str, str] = Field(default_factory=dict, description="Cache keys: 'eager'/'compile' -> baseline id.")


class Provenance(BaseModel):
    """Where and with what a result was produced."""

    model_config = ConfigDict(extra="allow")

    backend: str = Field("", description="Backend name ('cuda', 'cpu').")
    device: str = Field("", description="Device name, e.g. 'NVIDIA H200' or the CPU model.")
    driver: str | None = Field(None, description="GPU driver version.")
    cuda: str | None = Field(None, description="CUDA version torch was built with / nvcc version.")
    torch: str = Field("", description="torch.__version__.")
    python: str = Field("", description="Python version.")
    package_version: str = Field("", description="cuda-agent version.")
    config_hash: str | None = Field(None, description="Hash of the resolved run config, secrets excluded.")
    host: str = Field("", description="Host name.")
    plugins: dict[str, str] = Field(
        default_factory=dict, description="Enabled plugins: name -> 'distribution version' (built-ins: 'cuda-agent 0.1.0')."
    )
    system_prompt_hash: str | None = Field(
        None, description="sha256 of the whole system prompt the model saw: rendered text (skill, task) + tool schemas."
    )


class CandidateResult(BaseModel):
    """What evaluating one candidate (workspace state) found."""

    model_config = ConfigDict(extra="forbid")

    schema_version: str = Field(INTERFACES_VERSION, description="Interfaces version this record follows.")
    task_id: str = Field(description="TaskManifest.id.")
    phase: Literal["compile", "verify", "profile", "grade"] = Field(
        description="Which evaluation produced this: a tool call or the trusted final grading pass."
    )
    status: Status = Field(description="Outcome.")
    rule: str | None = Field(None, description="Integrity rule id when status is 'rejected' (e.g. 'T1.ast.torch_call').")
    message: str = Field("", description="One-paragraph summary the agent sees first.")
    errors: list[CheckError] = Field(default_factory=list, description="Every failed check.")
    timing: Timing | None = Field(None, description="Candidate timing (profile/grade).")
    baselines: Baselines | None = Field(None, description="Baseline timings (profile/grade).")
    speedup_eager: float | None = Field(None, description="t_eager / t_candidate (medians).")
    speedup_compile: float | None = Field(None, description="t_compile / t_candidate (medians).")
    flags: list[str] = Field(default_factory=list, description="Warnings that did not fail, e.g. 'speed_of_light_capped'.")
    isolation: str = Field("none", description="Isolation level: 'bwrap', 'process', 'none'.")
    snapshot_id: str | None = Field(None, description="Content-addressed id of the workspace state evaluated.")
    seeds: list[int] = Field(default_factory=list, description="Seeds used (recorded only after the run; secret before).")
    duration_s: float | None = Field(None, description="Wall time of this evaluation.")
    provenance: Provenance = Field(default_factory=Provenance, description="Machine and software.")
    extra: dict[str, Any] = Field(default_factory=dict, description="Backend-specific details (build log tail, ncu...).")

    @property
    def passed(self) -> bool:
        return self.status is Status.correct

    def summary_for_agent(self, limit: int = 4000) -> str:
        """A compact observation text; the tools append it to what the model sees."""
        lines = [f"status: {self.status.value}" + (f" (rule {self.rule})" if self.rule else "")]
        if self.message:
            lines.append(self.message)
        for err in self.errors[:10]:
            where = f" [input set {err.input_set}]" if err.input_set is not None else ""
            lines.append(f"- {err.check}{where}: {err.message}")
        if len(self.errors) > 10:
            lines.append(f"- ... {len(self.errors) - 10} more")
        if self.timing:
            lines.append(f"candidate: {self.timing.median_ms:.4f} ms (median of {self.timing.samples}, {self.timing.method})")
        if self.baselines:
            if self.baselines.eager:
                lines.append(f"eager: {self.baselines.eager.median_ms:.4f} ms")
            if self.baselines.compile:
                lines.append(f"torch.compile ({self.baselines.compile_mode}): {self.baselines.compile.median_ms:.4f} ms")
        if self.speedup_eager is not None:
            lines.append(f"speedup vs eager: {self.speedup_eager:.3f}x")
        if self.speedup_compile is not None:
            lines.append(f"speedup vs compile: {self.speedup_compile:.3f}x")
        text = "\n".join(lines)
        return text if len(text) <= limit else text[: limit - 40] + "\n[... truncated by harness ...]"
