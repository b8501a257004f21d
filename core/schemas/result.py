"""CandidateResult: the one record every consumer of an evaluation reads.

The compile/verify/profile tools, the trusted grading pass, ``score``,
``result.json``, evaluation metrics, rewards and data filters all read and
write this record; nothing else carries verdicts.
"""

from __future__ import annotations

import time
from enum import Enum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from cuda_agent import INTERFACES_VERSION


class Status(str, Enum):
    """Outcome of evaluating a candidate."""

    correct = "correct"
    incorrect = "incorrect"
    compile_error = "compile_error"
    rejected = "rejected"  # an integrity rule fired; ``rule`` names it
    error = "error"  # the candidate crashed, or the harness could not evaluate it
    timeout = "timeout"
    #: Not even one input set fits in the device's memory budget beside both processes (interfaces 2.1); the
    #: message names the bytes needed and available. No reward; counted on its own, never as a harness error.
    too_large = "too_large"


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
    raw_ms: list[float] = Field(
        default_factory=list,
        description="Per-call times in call order, kept where a caller asks for them (the suite self-check); empty "
        "elsewhere (interfaces 2.1).")


class Baselines(BaseModel):
    """Baseline timings on the same machine, with the ids of their cache entries."""

    model_config = ConfigDict(extra="forbid")

    eager: Timing | None = Field(None, description="Eager PyTorch reference.")
    compile: Timing | None = Field(None, description="torch.compile of the reference.")
    compile_mode: str = Field("default", description="torch.compile mode used for the compile baseline.")
    ids: dict[str, str] = Field(default_factory=dict, description="Cache keys: 'eager'/'compile' -> baseline id.")
    backend_flags: dict[str, Any] = Field(
        default_factory=dict, description="Precision flags the reference and baselines ran with (TF32, cuDNN).")


class Provenance(BaseModel):
    """Where and with what a result was produced."""

    model_config = ConfigDict(extra="allow")

    backend: str = Field("", description="Registered backend name ('cuda', 'cpu', 'triton'); before 3.0 the device kind.")
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


class SpinCalibration(BaseModel):
    """How a CUDA timer sized its pre-roll spin: asked microseconds, cycles per microsecond found, probe times."""

    model_config = ConfigDict(extra="forbid")

    preroll_us: float = Field(0.0, description="The spin asked for, microseconds (0: no spin).")
    cycles_per_us: float = Field(0.0, description="GPU clock cycles of the spin kernel per microsecond found.")
    probes_ms: list[float] = Field(default_factory=list, description="Event times of the calibration probes, ms.")


class StartPhase(BaseModel):
    """What one phase of a candidate runner's start cost: wall seconds and the process's CPU seconds (all threads)."""

    model_config = ConfigDict(extra="forbid")

    wall_s: float = Field(description="Wall seconds the phase took.")
    cpu_s: float = Field(description="CPU seconds the runner process spent in it (time.process_time, all threads).")


class BuildInfo(BaseModel):
    """The build behind a result."""

    model_config = ConfigDict(extra="forbid")

    steps: int = Field(0, description="Translation units (re)built.")
    seconds: float = Field(0.0, description="Wall time of the build.")
    isolation: str = Field("none", description="Sandbox of the compiler.")
    arch: str | None = Field(None, description="CUDA architecture built for.")


class InputSetsInfo(BaseModel):
    """How the input sets reached the candidate's process."""

    model_config = ConfigDict(extra="forbid")

    seeded: int = Field(0, description="Sets the runner made itself from their seeds (fingerprints matched).")
    staged: int = Field(0, description="Sets handed over by the trusted side.")


class WidenedInfo(BaseModel):
    """Input sets widened within each input's domain, checked by the grading pass (harness/widening.py)."""

    model_config = ConfigDict(extra="forbid")

    checked: int = Field(0, description="Widened sets the candidate was compared on.")
    inconclusive: int = Field(0, description="Widened sets given up: the reference was not finite (or too sensitive "
                              "to grade on) at any widening.")
    plan: list[str] = Field(default_factory=list, description="How each input was widened (the 'wide' kind).")
    kinds: list[str] = Field(default_factory=list, description="The kind of each widened set made (3.5): 'wide', "
                             "'large', 'shift', 'shrink', 'dup' (harness/widening.py).")
    outcomes: list[str] = Field(default_factory=list, description="What became of each widened set tried (3.5): "
                                "checked (at which share of its widening), or inconclusive and why.")


class MemoryInfo(BaseModel):
    """How the session's input sets were sized to the device's memory budget (harness/memory_budget.py)."""

    model_config = ConfigDict(extra="forbid")

    bytes_per_set: int = Field(description="Inputs plus outputs of one input set.")
    reference_sets: int = Field(description="Input sets the reference process held at once; others were made again.")
    runner_sets: int = Field(description="Input sets the runner held at once; others were handed over per call.")
    fresh_sets: int = Field(description="Fresh sets staged at once for the timed calls.")
    reserved_bytes: int = Field(description="Bytes the session reserved in the device's budget.")
    capacity_bytes: int = Field(description="The budget's capacity (a share of the memory free when it was made).")
    remade_sets: int = Field(0, description="Sets made again from their seeds after being dropped to save memory.")
    exports_released_bytes: int = Field(
        0, description="Bytes of device allocations the reference had exported sets in for a hand-over and freed when "
        "the runner dropped its copy (3.2; CUDA 'vmm' hand-overs in memory-constrained sessions).")
    peak_bytes: int | None = Field(
        None, description="Peak device memory of the reference process plus the runner (CUDA; None elsewhere).")
    exclusive_retry: bool = Field(
        False, description="The session ran again holding the device alone, after an out-of-memory error of the "
        "harness's own beside other work (reserved_bytes stays the session's own footprint).")


class FreshSetsInfo(BaseModel):
    """The timed calls on input sets made for that call alone (harness/fresh_sets.py, T12)."""

    model_config = ConfigDict(extra="forbid")

    calls: int = Field(0, description="Fresh-set calls compared with their rotated neighbours.")
    median_ms: float | None = Field(None, description="Median time of the fresh-set calls.")
    neighbours_median_ms: float | None = Field(None, description="Median of the rotated calls just before them.")
    reported: Literal["all", "confirmation", "fresh", "none"] | None = Field(
        None, description="Which samples the time is: 'all', 'confirmation' (a second look found no gap), 'fresh' "
        "(the fresh calls of both looks), 'none' (a first look that was superseded).")
    first_look: FreshSetsInfo | None = Field(None, description="The first look, when a gap made the pass look again.")
    charge: float | None = Field(None, description="Factor the reported samples were scaled by for a fresh-set gap "
                                 "within the slack (over 5%: harness/fresh_sets.fresh_charge); None when not charged.")


class SanitizerInfo(BaseModel):
    """One verify pass under compute-sanitizer."""

    model_config = ConfigDict(extra="forbid")

    tool: str = Field(description="memcheck, racecheck or initcheck.")
    exit_code: int | None = Field(None, description="Exit code of the sanitized runner (None: it had to be killed).")
    output_tail: str = Field("", description="The end of the sanitizer's report.")
    error: str | None = Field(None, description="Why the sanitized run ended early, if it did.")
    phase: str = Field("verify", description="The evaluation it ran in: 'verify' (integrity.sanitizer) or 'grade' "
                       "(integrity.grade_sanitizer; interfaces 3.0).")
    findings: int = Field(0, description="Findings that count (outside the library filter).")
    ignored: list[str] = Field(default_factory=list, description="Kernels whose findings the library filter ignored "
                               "(torch, vendor libraries: harness/sanitizer.py LIBRARY_KERNELS).")
    first_report: str = Field("", description="The first finding that counts, as the sanitizer printed it.")


class Diagnostics(BaseModel):
    """How an evaluation went, for people and benchmarks: never part of a verdict (interfaces 2.0; in 1.x this
    was the free-form ``extra`` dict, whose keys map onto these fields)."""

    model_config = ConfigDict(extra="forbid")

    phase_s: dict[str, float] = Field(default_factory=dict, description="Seconds spent per evaluator phase.")
    call_work_s: dict[str, float] = Field(
        default_factory=dict,
        description="Where the forward calls' seconds (phase_s['forward_calls']) went, summed over the calls (3.1): "
        "the runner's own 'copy_inputs', 'poison', 'timed' (the timing protocol's take: flush, spin, forward, "
        "sync), 'outputs' (describing and fingerprinting them), 'input_fingerprints', and 'round_trip' (the rest: "
        "messages between the processes, the trusted side's wait).")
    build: BuildInfo | None = Field(None, description="The build this result used.")
    build_s: float | None = Field(None, description="Seconds of the build step of a verify/profile/grade.")
    input_sets: InputSetsInfo | None = Field(None, description="How the input sets reached the candidate.")
    reverified_sets: int | None = Field(None, description="Sets a profile re-checked (same build just verified).")
    spot_checks: int = Field(0, description="Timed calls whose outputs were compared.")
    fresh_sets: FreshSetsInfo | None = Field(None, description="Fresh-set calls and what the time rests on.")
    memory: MemoryInfo | None = Field(None, description="Input sets sized to the device's memory budget (2.1).")
    widened: WidenedInfo | None = Field(None, description="The widened input sets a grading pass checked (2.1).")
    noise_floor: dict[str, float] = Field(
        default_factory=dict,
        description="By output position, the largest absolute tolerance floor measured on an ordinary set (3.6): "
        "where the scale-aware atol (rtol x the reference's RMS) is below the paper's, 4x how far the reference's "
        "output moves when its inputs move by 2**-22 relative, never above the paper's atol (harness/noise_floor.py; "
        "absent: nothing was floored, or the sets were above 1 GiB and not measured).")
    fresh_hand_overs: int = Field(0, description="Fresh sets handed over inside timed batches.")
    fresh_set_fallbacks: list[str] = Field(default_factory=list, description="Descriptor hand-overs that used files.")
    transport: str | None = Field(None, description="How outputs were handed over last: 'ipc', 'vmm' or 'host'.")
    transport_note: str | None = Field(None, description="Why a hand-over fell back, if one did.")
    baselines_cached: bool | None = Field(None, description="Every baseline came from the cache (profile).")
    speed_of_light_ms: float | None = Field(None, description="The physical floor the time was capped at (T22).")
    grade_rounds: int | None = Field(None, description="Interleaved rounds of the grading pass.")
    grade_rounds_run: int | None = Field(
        None, description="Rounds the grading pass ran (3.7): grade_rounds, or fewer where the precision stop "
        "(timing preset 'standard_fast') ended it; a fresh-set confirmation round is not counted.")
    grade_stop_reason: str | None = Field(
        None, description="Why the grading pass's rounds ended (3.7): 'all_rounds' (the precision stop off), "
        "'precise: ...' (stopped: each speedup and its 95% interval, within the target and clear of every "
        "threshold line), 'max_rounds: ...' (the stop on, never met: what held it at the last round).")
    grade_round_calls: dict[str, list[int]] = Field(
        default_factory=dict, description="Per variant ('candidate', 'eager', 'compile'), the timed calls of each "
        "grading round in order (3.7), a fresh-set confirmation round included: with Timing.raw_ms (the suite "
        "self-check) it splits the samples into rounds, for replays of the stop (benchmarks/grading_stop_replay.py). "
        "The candidate's raw_ms are the rounds' samples unless the fresh-set rule replaced them (their count differs).")
    baseline_host: dict[str, dict[str, float]] = Field(
        default_factory=dict,
        description="Per baseline kind ('eager', 'compile'), the reference process's timed batches of a grading "
        "pass (3.3): 'calls', 'over_spin' (the host's enqueue outlasted the spin), 'retakes', 'max_enqueue_ms', and "
        "on CUDA the caching allocator's 'alloc_retries' (a cudaMalloc retried after freeing the process's cached "
        "blocks: too little free device memory, so the baseline paid for allocations inside its timed calls and "
        "every speed-up against it reads too large) and 'ooms'; for the kind the grade compiled before its batches, "
        "'prepare_s' and 'prepare_compiles' (frames TorchDynamo compiled then: above 0 after a warm-up that "
        "compiled is a recompile the grade paid for); 'spin_blocked' (3.7): calls timed behind the base spin because "
        "their host waits for the device (harness/spin_policy.py).")
    device_lock: dict[str, float] = Field(
        default_factory=dict,
        description="The session's use of the device's timing lock (3.4): 'exclusive_s' (seconds its timed batches "
        "held the device to themselves: the part of a run that no concurrency overlaps, so the floor of a suite's "
        "time), 'exclusive_wait_s' (seconds it waited for that: other tasks' timed batches, untimed work "
        "finishing), 'exclusive_takes' and 'shared_wait_s' (waits for the shared mode of untimed device work).")
    candidate_host: dict[str, float] = Field(
        default_factory=dict,
        description="The candidate's timed calls of the session as its runner reported them (3.7; CUDA): 'calls', "
        "'over_spin' (the host's enqueue outlasted the spin), 'spin_blocked' (timed behind the base spin because "
        "the host waits for the device inside the call: harness/spin_policy.py, the rule the baselines' timer "
        "follows too) and 'max_enqueue_ms'. Reported from the candidate's process: for people, never a verdict.")
    runner_spin: SpinCalibration | None = Field(None, description="How the runner sized its spin at its start.")
    runner_start_s: float | None = Field(
        None, description="Seconds the session's runner took from its spawn to ready (torch import, device "
                          "initialisation); on a loaded host this bounds how fast the spare runners refill.")
    runner_start_phases: dict[str, StartPhase] = Field(
        default_factory=dict, description="That start by phase, in order (interpreter, setup, imports, device_init, "
                                          "cpu_warmup, loader_prepare, device_timer, audit_warmup, guard_snapshot).")
    runner_start_cpu_s: float | None = Field(
        None, description="CPU seconds the session's runner had used when ready, interpreter start included.")
    runner_spin_recalibrated: SpinCalibration | None = Field(None, description="Sized again under the lock.")
    timing_overhead_ms: float | None = Field(None, description="The protocol's own cost subtracted (experiments).")
    sanitizer: SanitizerInfo | None = Field(None, description="The compute-sanitizer pass, when one ran.")
    static_sources_checked: int | None = Field(None, description="Sources the static rules read (score).")
    output_tail: str | None = Field(None, description="The candidate's last output, when it failed.")
    traceback: str | None = Field(None, description="The candidate's traceback, when it raised.")
    legacy: dict[str, Any] = Field(default_factory=dict, description="Keys of a 1.x record's 'extra' with no field.")

    def tick(self, phase: str, since: float) -> float:
        """Add the seconds since ``since`` (``time.perf_counter``) to ``phase_s[phase]``; returns now."""
        now = time.perf_counter()
        self.phase_s[phase] = round(self.phase_s.get(phase, 0.0) + now - since, 6)
        return now

    @classmethod
    def from_extra(cls, extra: dict[str, Any]) -> Diagnostics:
        """The diagnostics of a 1.x record's ``extra`` dict (keys that do not fit a field go to ``legacy``)."""
        fields: dict[str, Any] = {}
        legacy: dict[str, Any] = {}
        for key, value in extra.items():
            if key in cls.model_fields and key != "legacy":
                try:
                    cls.model_validate({key: value})
                except ValidationError:
                    legacy[key] = value
                else:
                    fields[key] = value
            else:
                legacy[key] = value
        return cls.model_validate({**fields, "legacy": legacy})


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
    integrity_weakened: list[str] = Field(
        default_factory=list, description="Integrity controls set weaker than their defaults for this evaluation "
        "('isolation=process', ...); empty for the trusted grading pass, which always runs with the defaults.")
    diagnostics: Diagnostics = Field(
        default_factory=Diagnostics, description="How the evaluation went (phases, hand-overs, fresh sets...).")

    @model_validator(mode="before")
    @classmethod
    def _from_version_1(cls, data: Any) -> Any:
        """A 1.x record's free-form ``extra`` becomes :attr:`diagnostics` (its schema_version is kept)."""
        if isinstance(data, dict) and "extra" in data:
            data = dict(data)
            extra = data.pop("extra") or {}
            if "diagnostics" not in data and isinstance(extra, dict):
                data["diagnostics"] = Diagnostics.from_extra(extra)
        return data

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
