"""Knobs for benchmarks and tests only: never part of a run config.

The public settings (:class:`~cuda_agent.harness.settings.HarnessSettings`) hold what a user changes. Everything
else the trusted side can vary lives here, for measurements (``benchmarks/``) and for tests that need an exact
protocol: overrides of single :class:`~cuda_agent.harness.timing_protocol.TimingProtocol` fields, the hand-over
modes, the sandbox's namespaces, the reference pool's sizes. Pass one to
``Evaluator(kind, settings, experiments=...)`` or set ``KernelBackend.experiments`` before its first evaluation.
What these knobs did when they were measured is in ``docs/timing-experiments.md``.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from cuda_agent.harness.timing_protocol import TimingProtocol

#: Defaults by device kind of the fields left None (reference processes started ahead cost a CUDA context each only
#: once a task arrives; on CPU two cores cannot afford their imports).
DEVICE_POOL_DEFAULTS: dict[str, dict[str, int]] = {"cuda": {"spare_references": 2}, "cpu": {"spare_references": 0}}


class ExperimentSettings(BaseModel):
    """Benchmark- and test-only settings of one evaluator (see the module docstring)."""

    model_config = ConfigDict(extra="forbid")

    timing: dict[str, Any] = Field(
        default_factory=dict,
        description="Overrides of TimingProtocol fields, e.g. {'min_calls': 5, 'timer': {'preroll_us': 0}}.")
    cuda_transport: Literal["auto", "ipc", "host", "vmm"] = Field(
        "auto", description="Output hand-over (harness/transport.py); 'auto': vmm under bubblewrap, else ipc.")
    fresh_set_transport: Literal["auto", "descriptors", "files"] = Field(
        "auto", description="How fresh sets reach the runner (harness/transport.py).")
    input_transport: Literal["seeded", "staged"] = Field(
        "seeded", description="'seeded': the runner makes each set from its seed before the candidate loads; "
        "'staged': every set is handed over.")
    unshare_pid: bool | None = Field(None, description="Own pid namespace for the candidate; None = unless 'ipc'.")
    sandbox_uid: int | None = Field(65534, description="uid/gid inside the sandbox's user namespace; None = keep.")
    bwrap_path: str | None = Field(None, description="bwrap binary; None = the bundled one, then PATH.")
    timing_cpus: Literal["any", "gpu_local"] = Field(
        "any", description="Cores of the timing processes: anywhere, or those NVML lists as local to the GPU.")
    warm_references: int = Field(16, ge=1, description="Reference processes kept warm per evaluator (LRU).")
    spare_references: int | None = Field(
        None, ge=0, description="Reference processes started ahead of time; None = the device kind's default.")
    reference_compile_threads: int | None = Field(
        1, ge=1, description="torch.compile workers of each reference process; None = inductor's default.")
    watchdog_interval_s: float = Field(0.05, gt=0, description="Polling interval of the memory watchdogs.")
    output_log_limit: int = Field(4000, ge=200, description="Characters of candidate output kept (tail).")
    init_seed: int = Field(42, description="Seed set before building Model and ModelNew (KernelBench convention).")

    @field_validator("timing")
    @classmethod
    def _known_timing_fields(cls, value: dict[str, Any]) -> dict[str, Any]:
        unknown = sorted(set(value) - set(TimingProtocol.model_fields))
        if unknown:
            raise ValueError(f"unknown timing protocol fields {unknown}; valid: {', '.join(TimingProtocol.model_fields)}")
        return value

    def spares(self, kind: str) -> int:
        """``spare_references`` resolved for a ``kind`` device."""
        if self.spare_references is not None:
            return self.spare_references
        return DEVICE_POOL_DEFAULTS.get(kind, {}).get("spare_references", 0)
