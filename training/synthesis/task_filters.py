"""The execution filters of data synthesis: verdicts over a task's :class:`ProbeReport`.

Each filter is a small class with a pydantic config, ``check(task, backend)``
returning a :class:`~cuda_agent.protocols.FilterVerdict` whose drop reason is
the filter's own name (the message and measurements say exactly what failed).
The pipeline runs the task once in a probe worker and stores the report in
``task.meta["probe"]``; used alone, a filter probes the task itself on the
backend's device. ``cpu_sizes`` judges a second report, of the task's
``CPU_SIZES`` variant run on the CPU (``task.meta["cpu_probe"]``). Registered
as plugins by ``cuda_agent.plugins.data.filters``.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from cuda_agent.protocols import FilterVerdict
from cuda_agent.schemas.task import TaskManifest
from cuda_agent.training.synthesis.execution_probe import ProbeReport, ProbeSettings, probe_once

#: Calls that make a task's reference random (checked in the code as well as by running it twice).
STOCHASTIC_CALLS = re.compile(
    r"\b(dropout|Dropout\w*|AlphaDropout|rrelu|RReLU|bernoulli|multinomial|gumbel_softmax|rand|randn_like|rand_like|normal_|uniform_|randint)\b"
)


def report_for(task: TaskManifest, backend: Any = None, settings: ProbeSettings | None = None) -> ProbeReport:
    """The task's probe report: ``task.meta['probe']`` when the pipeline put it there, else a fresh probe."""
    cached = task.meta.get("probe")
    if cached is not None:
        return cached if isinstance(cached, ProbeReport) else ProbeReport.model_validate(cached)
    settings = settings or ProbeSettings()
    if backend is not None and getattr(backend, "name", None) in ("cpu", "cuda"):
        settings = settings.model_copy(update={"device": backend.name})
    report = probe_once(task.id, task.code, settings)
    task.meta["probe"] = report.model_dump()
    return report


def cpu_check_settings(base: ProbeSettings | None = None) -> ProbeSettings:
    """Settings of the CPU-variant probe: ``base``'s limits, on the CPU, eager only, a short timing."""
    base = base or ProbeSettings()
    return base.model_copy(update={"device": "cpu", "compile_backend": None, "time_compiled": False, "warmup": 1,
                                   "min_repeats": 3, "max_repeats": 10, "timing_budget_s": 0.05, "threads": 1})


def cpu_variant_code(task: TaskManifest) -> str:
    """The task with its ``CPU_SIZES`` applied (what the CPU backend evaluates).

    :raises cuda_agent.harness.tasks.TaskProbeError: ``CPU_SIZES`` is missing, not a dict literal, or names
        a size the module does not define.
    """
    from cuda_agent.harness.tasks import apply_cpu_sizes

    return apply_cpu_sizes(task.code, task.id)


def cpu_report_for(task: TaskManifest, settings: ProbeSettings | None = None) -> ProbeReport:
    """The probe report of the task's CPU variant: ``task.meta['cpu_probe']`` when the pipeline put it there, else a fresh probe."""
    cached = task.meta.get("cpu_probe")
    if cached is not None:
        return cached if isinstance(cached, ProbeReport) else ProbeReport.model_validate(cached)
    report = probe_once(task.id, cpu_variant_code(task), cpu_check_settings(settings))
    task.meta["cpu_probe"] = report.model_dump()
    return report


def _forward_source(code: str) -> str:
    """The code outside get_inputs (random inputs are expected there)."""
    return re.split(r"\ndef get_inputs", code)[0]


class _Filter:
    name = ""

    def __init__(self, config: BaseModel | None = None) -> None:
        self.config = config if config is not None else self.Config()  # type: ignore[attr-defined]

    def keep(self, message: str = "", **measurements: Any) -> FilterVerdict:
        return FilterVerdict(keep=True, message=message, measurements=measurements)

    def drop(self, message: str, **measurements: Any) -> FilterVerdict:
        return FilterVerdict(keep=False, reason=self.name, message=message, measurements=measurements)


class RunsFilter(_Filter):
    """Keeps tasks that run in eager mode and under torch.compile (the worker survives them)."""

    name = "runs"

    class Config(BaseModel):
        """Settings of the 'runs' filter."""

        model_config = ConfigDict(extra="forbid")
        require_compile: bool = Field(True, description="Also require the torch.compile'd forward to run.")
        require_compile_match: bool = Field(True, description="Require the compiled output to match eager (atol=rtol=1e-2).")

    def check(self, task: TaskManifest, backend: Any = None) -> FilterVerdict:
        """Drop on a crash/timeout of the worker, an eager exception or a compile failure."""
        r = report_for(task, backend)
        if r.status in ("crash", "timeout"):
            return self.drop(f"worker {r.status}: {r.message[:300]}", status=r.status)
        if r.status == "memory_exceeded":
            return self.keep("memory is judged by the 'memory' filter")
        if not r.eager_ok:
            return self.drop(f"eager forward failed: {r.eager_error}")
        if self.config.require_compile and not r.compile_ok:
            return self.drop(f"torch.compile forward failed: {r.compile_error}")
        if self.config.require_compile and self.config.require_compile_match and r.compile_matches is False:
            return self.drop("torch.compile output differs from eager beyond atol=rtol=1e-2")
        return self.keep(eager_ms=r.eager_ms)


class DeterministicFilter(_Filter):
    """Keeps tasks whose two eager runs are bitwise equal and which call no stochastic op."""

    name = "deterministic"

    class Config(BaseModel):
        """Settings of the 'deterministic' filter."""

        model_config = ConfigDict(extra="forbid")
        check_source: bool = Field(True, description="Also drop tasks whose Model code calls a known stochastic op (dropout, rrelu, rand...).")

    def check(self, task: TaskManifest, backend: Any = None) -> FilterVerdict:
        """Drop stochastic tasks (declared, found in the source, or observed)."""
        if task.stochastic:
            return self.drop("the task is declared stochastic (a composed operator is)")
        if self.config.check_source:
            m = STOCHASTIC_CALLS.search(_forward_source(task.code))
            if m:
                return self.drop(f"the model calls stochastic op {m.group(0)!r}")
        r = report_for(task, backend)
        if r.deterministic is False:
            return self.drop("two eager runs on the same inputs differ")
        return self.keep()


class InformativeFilter(_Filter):
    """Keeps tasks whose output is finite, not near-constant, and differs across input sets."""

    name = "informative"

    class Config(BaseModel):
        """Settings of the 'informative' filter."""

        model_config = ConfigDict(extra="forbid")
        min_rel_std: float = Field(1e-3, ge=0, description="Smallest std/mean|.| of the output; below it the output is near-constant.")
        min_rel_input_diff: float = Field(1e-3, ge=0, description="Smallest max|out(a)-out(b)|/mean|out(a)| for two input sets; below it inputs are indistinguishable.")

    def check(self, task: TaskManifest, backend: Any = None) -> FilterVerdict:
        """Drop non-finite, near-constant or input-independent outputs."""
        r = report_for(task, backend)
        if not r.eager_ok:
            return self.keep("not run (judged by 'runs')")
        if not r.finite:
            return self.drop("output has NaN or Inf")
        if r.rel_std is None or r.rel_std < self.config.min_rel_std:
            return self.drop(f"output is near-constant (rel_std={r.rel_std})", rel_std=r.rel_std)
        if r.rel_input_diff is None or r.rel_input_diff < self.config.min_rel_input_diff:
            return self.drop(f"outputs of two input sets are indistinguishable (rel diff={r.rel_input_diff})", rel_input_diff=r.rel_input_diff)
        return self.keep(rel_std=r.rel_std, rel_input_diff=r.rel_input_diff)


class RuntimeWindowFilter(_Filter):
    """Keeps tasks whose median eager forward time lies in [min_ms, max_ms] (paper: 1-100 ms on the GPU)."""

    name = "runtime_window"

    class Config(BaseModel):
        """Settings of the 'runtime_window' filter."""

        model_config = ConfigDict(extra="forbid")
        min_ms: float = Field(1.0, ge=0, description="Shortest eager time kept, ms (paper: 1).")
        max_ms: float = Field(100.0, gt=0, description="Longest eager time kept, ms (paper: 100).")

    def check(self, task: TaskManifest, backend: Any = None) -> FilterVerdict:
        """Drop tasks outside the window."""
        r = report_for(task, backend)
        if r.eager_ms is None:
            return self.keep("not timed (judged by 'runs')")
        c = self.config
        if not c.min_ms <= r.eager_ms <= c.max_ms:
            return self.drop(f"eager time {r.eager_ms:.3f} ms outside [{c.min_ms}, {c.max_ms}] ms on {r.device}", eager_ms=r.eager_ms)
        return self.keep(eager_ms=r.eager_ms)


class MemoryFilter(_Filter):
    """Keeps tasks whose peak memory stays under a limit (and that did not hit the worker's cap)."""

    name = "memory"

    class Config(BaseModel):
        """Settings of the 'memory' filter."""

        model_config = ConfigDict(extra="forbid")
        max_mb: float = Field(4096.0, gt=0, description="Largest peak memory of one task, MiB (device memory on CUDA, RSS growth on CPU).")

    def check(self, task: TaskManifest, backend: Any = None) -> FilterVerdict:
        """Drop tasks over the limit."""
        r = report_for(task, backend)
        if r.status == "memory_exceeded":
            return self.drop(f"killed by the worker's memory cap: {r.message[:200]}")
        if r.peak_mem_mb is not None and r.peak_mem_mb > self.config.max_mb:
            return self.drop(f"peak memory {r.peak_mem_mb:.0f} MiB > max_mb={self.config.max_mb}", peak_mem_mb=r.peak_mem_mb)
        return self.keep(peak_mem_mb=r.peak_mem_mb)


class CpuSizesFilter(_Filter):
    """Keeps tasks whose CPU_SIZES variant (what the CPU backend evaluates) runs on the CPU, finite and fast."""

    name = "cpu_sizes"
    #: The pipeline probes the CPU variant for this filter (only for tasks every earlier filter kept).
    needs_cpu_probe = True

    class Config(BaseModel):
        """Settings of the 'cpu_sizes' filter."""

        model_config = ConfigDict(extra="forbid")
        required: bool = Field(True, description="Drop tasks that define no CPU_SIZES (the CPU backend would run them at full size).")
        max_ms: float = Field(100.0, gt=0, description="Longest median eager time of the CPU variant on one CPU thread, ms.")

    def check(self, task: TaskManifest, backend: Any = None) -> FilterVerdict:
        """Drop tasks without a valid ``CPU_SIZES`` or whose CPU variant fails, is non-finite, changes rank or is slow."""
        from cuda_agent.harness.tasks import TaskProbeError, has_cpu_sizes

        skipped = task.meta.get("cpu_probe_skipped")
        if skipped:
            return self.keep(f"not checked: {skipped}")
        if not has_cpu_sizes(task.code):
            if self.config.required:
                return self.drop("the task defines no CPU_SIZES = {'size_name': value, ...} for the CPU backend")
            return self.keep("no CPU_SIZES (the CPU backend runs the task at full size)")
        try:
            cpu_variant_code(task)
        except TaskProbeError as exc:
            return self.drop(f"CPU_SIZES cannot be applied: {exc}")
        r = cpu_report_for(task)
        if r.status != "ok":
            return self.drop(f"CPU variant: worker {r.status}: {r.message[:300]}", status=r.status)
        if not r.eager_ok:
            return self.drop(f"CPU variant: eager forward failed: {r.eager_error}")
        if not r.finite:
            return self.drop("CPU variant: output has NaN or Inf")
        full = report_for(task, backend) if task.meta.get("probe") is not None else None
        if full is not None and full.output_shapes and [len(s) for s in full.output_shapes] != [len(s) for s in r.output_shapes]:
            return self.drop(f"CPU variant: output shapes {r.output_shapes} do not have the ranks of the full task's {full.output_shapes}")
        if r.eager_ms is not None and r.eager_ms > self.config.max_ms:
            return self.drop(f"CPU variant: eager time {r.eager_ms:.3f} ms > max_ms={self.config.max_ms}", cpu_eager_ms=r.eager_ms)
        return self.keep(cpu_eager_ms=r.eager_ms, cpu_output_shapes=r.output_shapes)


#: Filter classes by registered name, in the order the pipeline applies them.
FILTERS: dict[str, type[_Filter]] = {
    f.name: f for f in (RunsFilter, DeterministicFilter, InformativeFilter, RuntimeWindowFilter, MemoryFilter, CpuSizesFilter)
}
