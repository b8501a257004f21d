"""Public settings of the trusted evaluation side: the ``harness`` block of a backend's config.

Five blocks (``plugins.cpu.harness`` / ``plugins.cuda.harness`` in a run config, e.g.
``-o plugins.cuda.harness.verify.input_sets=8``):

- ``verify``: how many input sets, which tolerances;
- ``timing``: a named preset (the protocol itself is internal: :mod:`cuda_agent.harness.timing_protocol`), the
  compile baseline, where baselines are cached;
- ``sandbox``: threads of the timed processes, runners started ahead, scratch space;
- ``limits``: memory and time limits of a candidate;
- ``integrity``: the anti-cheating controls. The trusted final grading always runs with the default integrity
  block (or a stricter choice); a weaker one affects only the in-episode tools, and every result they return
  names what was weakened (``CandidateResult.integrity_weakened``).

Knobs for measurements only are not here: :class:`~cuda_agent.harness.experiments.ExperimentSettings`. A key of
the earlier flat layout fails with the key that replaced it (:data:`MOVED_KEYS`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from cuda_agent.harness.timing_protocol import PRESETS

#: Absolute/relative tolerance of each preset, by dtype name; ``*`` is the fallback.
TOLERANCE_PRESETS: dict[str, dict[str, tuple[float, float]]] = {
    # The paper and the CUDA-Agent release: atol = rtol = 1e-2 for every dtype.
    "paper": {"*": (1e-2, 1e-2)},
    # Dtype-aware: tighter for fp32/fp64, looser for half types (torch.testing's spirit).
    "dtype": {
        "float64": (1e-7, 1e-7),
        "float32": (1e-4, 1e-4),
        "float16": (1e-3, 1e-3),
        "bfloat16": (1e-2, 1.6e-2),
        "*": (1e-2, 1e-2),
    },
}


def usable_cpus() -> int:
    """CPU cores this process may run on (its affinity mask: a lane pinned to 16 of 32 cores sees 16)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0)) or 1
    return os.cpu_count() or 1


class _Block(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class VerifySettings(_Block):
    """How a candidate's outputs are checked."""

    input_sets: int = Field(5, ge=1, description="Distinct input sets (secret seeds) per verify (paper: 5).")
    tolerance: Literal["paper", "dtype"] = Field(
        "paper", description="Tolerance preset: 'paper' (atol=rtol=1e-2) or 'dtype' (dtype-aware).")
    atol: float | None = Field(None, ge=0, description="Absolute tolerance override; None = the preset's.")
    rtol: float | None = Field(None, ge=0, description="Relative tolerance override; None = the preset's.")

    def tolerance_table(self, precision: Any) -> dict[str, tuple[float, float]]:
        """dtype -> (atol, rtol) for a task of ``precision`` (:class:`~cuda_agent.schemas.task.PrecisionContract`):
        the task's preset where it names one (else this block's), the task's overrides, then this block's."""
        preset = precision.tolerance if precision.tolerance in TOLERANCE_PRESETS else self.tolerance
        out = {}
        for dtype, (atol, rtol) in TOLERANCE_PRESETS[preset].items():
            atol = precision.atol if precision.atol is not None else atol
            rtol = precision.rtol if precision.rtol is not None else rtol
            out[dtype] = (self.atol if self.atol is not None else atol, self.rtol if self.rtol is not None else rtol)
        return out


class TimingSettings(_Block):
    """How candidates and baselines are timed."""

    preset: Literal["standard", "standard_fast", "quick", "release"] = Field(
        "standard", description="'standard' (our protocol, tuned per device), 'standard_fast' (standard with the "
        "grading pass's precision stop: rounds of 11 calls, 3 to 9 of them, ending once both speedups are known to "
        "+-1% and their intervals clear 0.95 and 1.05; for the suite self-check: the 1.0 line is not guarded), "
        "'quick' (few calls, one grading round: smoke runs and CI), 'release' (the CUDA-Agent release's profiler sum, "
        "for comparison).")
    compile_baseline: bool = Field(True, description="Measure the torch.compile baseline besides eager.")
    warm_compile: bool = Field(
        True, description="Compile the torch.compile baseline when a task's reference process warms up, before any "
        "device slot is taken. False leaves that compile to the first profile or grade that times the baseline (still "
        "outside the timing lock), and the reference process does not import the compile machinery ahead: training, "
        "where most episodes never time a baseline, spares the CPU. Timings and rewards are the same either way.")
    compile_mode: str = Field("default", description="torch.compile mode of the compile baseline (recorded).")
    baseline_cache_dir: Path | None = Field(
        None, description="Cache of baseline timings; None = ~/.cache/cuda-agent/baselines.")


class SandboxSettings(_Block):
    """The processes candidates and baselines run in."""

    cpu_threads: int = Field(
        1, ge=1, description="Intra-op/OpenMP threads of the candidate AND the baselines (the same for both; part "
        "of the baseline cache key). 1: on shared cores an OpenMP team waits for preempted threads.")
    runners_ahead: int | None = Field(
        None, ge=0, description="Candidate processes started ahead of time; None = one per 3 cores, 1 to 6.")
    scratch_dir: Path | None = Field(
        None, description="Where exchange folders are made; None = /dev/shm with 16 GiB free, else the temp dir.")


class LimitSettings(_Block):
    """What one candidate may use."""

    memory_mb: int = Field(16384, ge=64, description="Candidate process-tree RSS limit (watchdog kill), MiB.")
    gpu_memory_mb: int | None = Field(None, ge=1, description="Candidate GPU memory limit (NVML watchdog); None = none.")
    startup_timeout_s: float = Field(120.0, gt=0, description="Seconds a candidate process may take to start.")
    load_timeout_s: float = Field(300.0, gt=0, description="Seconds to make the input sets and load the candidate.")
    call_timeout_s: float = Field(60.0, gt=0, description="Seconds one forward call may take.")
    request_timeout_s: float = Field(600.0, gt=0, description="Seconds one profiling request may take.")
    device_memory_gib: float | None = Field(
        None, gt=0, description="Memory tasks may reserve on each device (GPU memory on CUDA, RAM on CPU), one budget "
        "shared by every task in flight; a task whose sets do not all fit holds fewer and makes the others again "
        "from their seeds. None = 85% of what is free when the first task starts (harness/memory_budget.py); a figure "
        "above that is lowered to it, with a warning.")


#: For each integrity field, whether a value is weaker than another (used to stamp and to pick for grading).
_ISOLATION_STRENGTH = {"process": 0, "auto": 1, "bwrap": 2}


class IntegritySettings(_Block):
    """The anti-cheating controls (docs/integrity.md). Grading always uses these defaults or stricter values."""

    isolation: Literal["auto", "bwrap", "process"] = Field(
        "auto", description="Candidate sandbox: 'bwrap' (required), 'auto' (bubblewrap when usable), 'process' "
        "(a plain subprocess: weaker).")
    fresh_set_calls: int = Field(
        4, ge=0, le=64, description="Timed calls on input sets made for that call alone, per profile and grading "
        "pass (T12: a result cache keyed by content misses there). 0 = off (weaker).")
    determinism_check: bool = Field(
        True, description="Run the first input set twice and require identical outputs (T21).")
    speed_of_light: bool = Field(True, description="Flag and cap times below the device's FLOP/byte floor (T22).")
    wall_clock_slack: float = Field(
        0.98, gt=0, le=1, description="The parent's wall clock must cover this fraction of the reported time (T8).")
    widened_sets: int = Field(
        8, ge=0, le=16, description="Input sets widened within the inputs' domains that the grading pass checks "
        "besides the ordinary ones, kinds in harness/widening.py's SCHEDULE order (x4 around zero, x1024, shifted, "
        "x/128, near duplicates of a verify set, a few x1024 spikes; T18: a kernel specialised to the task's input "
        "distribution fails, T12: a cache keyed on sampled elements serves stale results); every one but the near "
        "duplicates is called again among each grading round's timed calls. 0 = off (weaker).")
    sanitizer: Literal["off", "memcheck", "racecheck", "initcheck"] = Field(
        "off", description="Run one verify pass under compute-sanitizer with this tool (CUDA; slow). A tool that is "
        "not installed is an error.")
    grade_sanitizer: Literal["off", "memcheck", "memcheck+racecheck"] = Field(
        "off", description="The trusted grading pass (and score) also runs one input set of every graded solution "
        "under compute-sanitizer: memcheck, and racecheck where it applies (kernels with shared memory). A finding "
        "fails grading with rule T21.sanitizer.<tool> and the first report; findings inside torch or vendor-library "
        "kernels are ignored only through harness/sanitizer.py's LIBRARY_KERNELS filter. CUDA devices; a sanitizer "
        "that cannot run is a harness error.")

    def weakened(self) -> list[str]:
        """``field=value`` of every control set weaker than its default (empty: none)."""
        d = IntegritySettings()
        out = []
        if _ISOLATION_STRENGTH[self.isolation] < _ISOLATION_STRENGTH[d.isolation]:
            out.append(f"isolation={self.isolation}")
        if self.fresh_set_calls < d.fresh_set_calls:
            out.append(f"fresh_set_calls={self.fresh_set_calls}")
        if self.widened_sets < d.widened_sets:
            out.append(f"widened_sets={self.widened_sets}")
        for flag in ("determinism_check", "speed_of_light"):
            if not getattr(self, flag):
                out.append(f"{flag}=false")
        if self.wall_clock_slack < d.wall_clock_slack:
            out.append(f"wall_clock_slack={self.wall_clock_slack}")
        return out

    def for_grading(self) -> IntegritySettings:
        """What the trusted grading pass uses: each control at its default, or at this block's value where that is
        stricter. The sanitizer runs with verify only."""
        d = IntegritySettings()
        return IntegritySettings(
            isolation=max(self.isolation, d.isolation, key=_ISOLATION_STRENGTH.__getitem__),
            fresh_set_calls=max(self.fresh_set_calls, d.fresh_set_calls),
            widened_sets=max(self.widened_sets, d.widened_sets),
            determinism_check=True, speed_of_light=True,
            wall_clock_slack=max(self.wall_clock_slack, d.wall_clock_slack), sanitizer="off",
        )


#: Keys of the flat layout before interfaces 2.0 that are public settings now -> their new place.
MOVED_KEYS: dict[str, str] = {
    "n_input_sets": "verify.input_sets", "tolerance": "verify.tolerance", "atol": "verify.atol", "rtol": "verify.rtol",
    "timing": "timing.preset", "with_compile_baseline": "timing.compile_baseline",
    "compile_mode": "timing.compile_mode", "baseline_cache_dir": "timing.baseline_cache_dir",
    "cpu_threads": "sandbox.cpu_threads", "pool_size": "sandbox.runners_ahead", "scratch_dir": "sandbox.scratch_dir",
    "rss_limit_mb": "limits.memory_mb", "gpu_mem_limit_mb": "limits.gpu_memory_mb",
    "startup_timeout_s": "limits.startup_timeout_s", "load_timeout_s": "limits.load_timeout_s",
    "call_timeout_s": "limits.call_timeout_s", "request_timeout_s": "limits.request_timeout_s",
    "isolation": "integrity.isolation", "fresh_set_calls": "integrity.fresh_set_calls",
    "determinism_check": "integrity.determinism_check", "speed_of_light": "integrity.speed_of_light",
    "wall_clock_slack": "integrity.wall_clock_slack", "sanitizer": "integrity.sanitizer",
}
#: Keys of the flat layout that are fields of the internal timing protocol now -> the protocol field.
PROTOCOL_KEYS: dict[str, str] = {
    "warmup_calls": "warmup_calls", "min_timed_calls": "min_calls", "max_timed_calls": "max_calls",
    "target_rel_ci": "target_rel_ci", "max_timing_s": "max_batch_s", "min_timing_s": "min_batch_s",
    "timing_input_sets": "rotation_sets", "spot_check_every": "spot_check_every", "spot_check_max": "spot_check_max",
    "grade_rounds": "grade_rounds", "grade_calls_per_round": "grade_calls_per_round",
    "grade_spot_checks": "grade_spot_checks", "grade_round_budget_s": "grade_round_budget_s",
    "fresh_set_slack": "fresh_set_slack", "reverify_sets": "reverify_sets",
    "per_kernel_breakdown": "per_kernel_breakdown", "timing_net_overhead": "net_overhead",
    "baseline_clone_inputs": "baseline_clone_inputs", "timing_preroll_us": "timer.preroll_us",
    "timing_preroll_retakes": "timer.preroll_retakes", "timing_preroll_max_us": "timer.preroll_max_us",
    "timing_l2_flush_multiple": "timer.l2_flush_multiple", "timing_warm_input_pages": "timer.warm_input_pages",
}
#: Keys of the flat layout that are experiment-only settings now (the same name in ExperimentSettings).
EXPERIMENT_KEYS = frozenset({"timing_cpus", "warm_references", "spare_references", "reference_compile_threads",
                             "bwrap_path", "unshare_pid", "sandbox_uid", "watchdog_interval_s", "output_log_limit",
                             "cuda_transport", "fresh_set_transport", "input_transport", "init_seed"})


def moved_key_message(key: str) -> str:
    """Why a key of the earlier flat layout is refused, and what replaced it."""
    if key == "timing":
        return ("harness setting 'timing' (a method name) is the block 'timing' now: choose the method with "
                "'timing.preset' ('standard' was 'ours', 'release' was 'release_profiler_sum')")
    if key in PROTOCOL_KEYS:
        return (f"harness setting {key!r} is part of the internal timing protocol now: choose a protocol with "
                f"'timing.preset' ({', '.join(PRESETS)}); benchmarks and tests set it as "
                f"ExperimentSettings.timing[{PROTOCOL_KEYS[key]!r}] (cuda_agent.harness.experiments)")
    if key in EXPERIMENT_KEYS:
        return (f"harness setting {key!r} is for experiments only now: ExperimentSettings.{key} "
                "(cuda_agent.harness.experiments; benchmarks and tests), not a run config")
    return f"harness setting {key!r} moved: use {MOVED_KEYS[key]!r}"


class HarnessSettings(_Block):
    """How candidates are verified, timed, isolated and graded (the ``harness`` block of a backend)."""

    verify: VerifySettings = Field(default_factory=VerifySettings, description="Input sets and tolerances.")
    timing: TimingSettings = Field(default_factory=TimingSettings, description="Timing preset and baselines.")
    sandbox: SandboxSettings = Field(default_factory=SandboxSettings, description="Candidate processes.")
    limits: LimitSettings = Field(default_factory=LimitSettings, description="Memory and time limits.")
    integrity: IntegritySettings = Field(
        default_factory=IntegritySettings, description="Anti-cheating controls (grading keeps the defaults).")

    @model_validator(mode="before")
    @classmethod
    def _refuse_moved_keys(cls, data: Any) -> Any:
        if isinstance(data, dict):
            old = [k for k in data if k not in cls.model_fields
                   and (k in MOVED_KEYS or k in PROTOCOL_KEYS or k in EXPERIMENT_KEYS)]
            if old:
                raise ValueError("; ".join(moved_key_message(k) for k in old))
            if isinstance(data.get("timing"), str):  # the earlier 'timing: ours' key
                raise ValueError(moved_key_message("timing"))
        return data

    def runners_ahead(self) -> int:
        """``sandbox.runners_ahead`` resolved (None: one per 3 cores, between 1 and 6)."""
        if self.sandbox.runners_ahead is not None:
            return self.sandbox.runners_ahead
        return max(1, min(6, usable_cpus() // 3))

    def resolved_baseline_cache(self) -> Path:
        """The baseline cache folder (created on first use by the cache)."""
        return self.timing.baseline_cache_dir or Path.home() / ".cache" / "cuda-agent" / "baselines"
