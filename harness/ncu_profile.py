"""Nsight Compute hardware counters of a candidate's kernels, as a short summary the model can act on.

One input set from a fresh secret seed, one call of the candidate in a runner started under ``ncu`` in the same
sandbox, under the device's timing lock, with ``--clock-control none`` (the clocks the kernels are timed at) and a
time limit (kernel replay of a large task saves and restores gigabytes per pass). Only the candidate's own kernels
are profiled (their names come from the backend's adapter). Per kernel: duration, the limiting unit, SM, DRAM, L2
and L1 throughput as shares of peak, achieved and theoretical occupancy, registers per thread, shared memory per
block, and the top warp stall reasons; the text is cut to a token budget.

Where counters cannot be read (``ERR_NVGPUCTRPERM``: the driver restricts them to administrators, and the sandbox
runs as uid 65534) the profile refuses with :class:`NcuRefused` saying so; no ncu, or no CUDA device, likewise.
"""

from __future__ import annotations

import csv
import io
import re
import secrets
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from cuda_agent.errors import CudaAgentError

if TYPE_CHECKING:
    from cuda_agent.harness.evaluator import Evaluator
    from cuda_agent.schemas.task import TaskManifest

#: Metrics asked for (each section of ncu would cost replay passes we do not need).
METRICS: tuple[str, ...] = (
    "gpu__time_duration.sum",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "lts__throughput.avg.pct_of_peak_sustained_elapsed",
    "l1tex__throughput.avg.pct_of_peak_sustained_active",
    "sm__warps_active.avg.pct_of_peak_sustained_active",
    "sm__maximum_warps_per_active_cycle_pct",
    "launch__registers_per_thread",
    "launch__shared_mem_per_block_static",
    "launch__shared_mem_per_block_dynamic",
    "launch__block_size",
    "launch__grid_size",
)
#: Warp-stall metrics (per issued instruction) come from this section; their names are matched by :data:`STALL`.
SECTIONS: tuple[str, ...] = ("WarpStateStats",)
STALL = re.compile(r"^smsp__(?:average_)?warps?_issue_stalled_(?P<reason>[a-z_]+?)_per_(?:issue|warp)_active"
                   r"(?:\.ratio|\.pct)?$")
#: Units the limiter is chosen among: metric -> name shown.
UNITS = {"sm__throughput.avg.pct_of_peak_sustained_elapsed": "SM (compute)",
         "dram__throughput.avg.pct_of_peak_sustained_elapsed": "DRAM",
         "lts__throughput.avg.pct_of_peak_sustained_elapsed": "L2",
         "l1tex__throughput.avg.pct_of_peak_sustained_active": "L1/shared"}
#: Below this share of peak on every unit a kernel is latency-bound (neither memory nor compute is busy).
LATENCY_BOUND_PCT = 60.0
_TIME_UNITS = {"nsecond": 1e-3, "usecond": 1.0, "msecond": 1e3, "second": 1e6}
PERMISSION_ERROR = "ERR_NVGPUCTRPERM"


class NcuRefused(CudaAgentError):
    """Counters cannot be read for this call (no ncu, no CUDA device, no permission, over the time limit)."""


@dataclass
class KernelCounters:
    """One profiled kernel launch."""

    name: str
    metrics: dict[str, float] = field(default_factory=dict)
    stalls: dict[str, float] = field(default_factory=dict)
    block: str = ""
    grid: str = ""
    duration_us: float | None = None

    def get(self, metric: str) -> float | None:
        """A metric's value, None when ncu did not report it."""
        return self.metrics.get(metric)

    def limiter(self) -> tuple[str, float | None]:
        """The busiest unit and its share of peak; 'latency' when no unit reaches :data:`LATENCY_BOUND_PCT`."""
        shares = [(name, self.metrics[m]) for m, name in UNITS.items() if m in self.metrics]
        if not shares:
            return "unknown", None
        name, pct = max(shares, key=lambda s: s[1])
        return (name, pct) if pct >= LATENCY_BOUND_PCT else ("latency (no unit above 60% of peak)", pct)


def ncu_path() -> str | None:
    """The ``ncu`` binary: PATH, then the CUDA toolkit's folders; None when absent."""
    found = shutil.which("ncu")
    if found:
        return found
    import os

    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if home and (Path(home) / "bin" / "ncu").is_file():
            return str(Path(home) / "bin" / "ncu")
    return None


def _number(text: str) -> float | None:
    try:
        return float(text.replace(",", "").strip())
    except ValueError:
        return None


def parse_ncu_csv(text: str) -> list[KernelCounters]:
    """The kernels of ncu's ``--csv --page raw`` output (a header row, a units row, one row per kernel launch);
    lines around the table (``==PROF==`` progress, warnings) are skipped."""
    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.startswith('"ID"')), None)
    if start is None:
        return []
    table = [ln for ln in lines[start:] if ln.startswith('"')]
    rows = list(csv.reader(io.StringIO("\n".join(table))))
    if len(rows) < 2:
        return []
    header, units = rows[0], rows[1]
    out = []
    for row in rows[2:]:
        cells = dict(zip(header, row))
        unit = dict(zip(header, units))
        k = KernelCounters(name=cells.get("Kernel Name", "?"), block=cells.get("Block Size", ""),
                           grid=cells.get("Grid Size", ""))
        for name, raw in cells.items():
            value = _number(raw)
            if value is None:
                continue
            m = STALL.match(name)
            if m:
                k.stalls[m.group("reason")] = value
            elif "__" in name:
                k.metrics[name] = value
        dur = k.metrics.get("gpu__time_duration.sum")
        if dur is not None:
            k.duration_us = dur * _TIME_UNITS.get(unit.get("gpu__time_duration.sum", "nsecond"), 1e-3)
        out.append(k)
    return out


def count_tokens(text: str) -> int:
    """Tokens of ``text`` as a BPE tokenizer counts them, from above: every word, number and punctuation mark is
    at least one token (subword splits of long words only add; numbers are split at the '.', as here)."""
    return len(re.findall(r"[A-Za-z]+|\d+|[^\sA-Za-z\d]", text))


def _pct(k: KernelCounters, metric: str) -> str:
    v = k.get(metric)
    return "n/a" if v is None else f"{v:.0f}%"


def format_kernel(k: KernelCounters, top_stalls: int = 3) -> str:
    """A kernel's summary: launch shape and resources, time and limiter, unit shares, occupancy, top stalls."""
    regs = k.get("launch__registers_per_thread")
    smem = (k.get("launch__shared_mem_per_block_static") or 0) + (k.get("launch__shared_mem_per_block_dynamic") or 0)
    unit, pct = k.limiter()
    stalls = sorted(k.stalls.items(), key=lambda s: -s[1])[:top_stalls]
    name = k.name if len(k.name) <= 60 else k.name[:57] + "..."
    lines = [
        f"{name}: grid {k.grid or '?'} block {k.block or '?'}, {regs:.0f} registers/thread, "
        f"{smem:.0f} B shared/block" if regs is not None else f"{name}: grid {k.grid or '?'} block {k.block or '?'}",
        f"  time {k.duration_us:.1f} us, limited by {unit}" if k.duration_us is not None else f"  limited by {unit}",
        f"  throughput of peak: SM {_pct(k, 'sm__throughput.avg.pct_of_peak_sustained_elapsed')}, "
        f"DRAM {_pct(k, 'dram__throughput.avg.pct_of_peak_sustained_elapsed')}, "
        f"L2 {_pct(k, 'lts__throughput.avg.pct_of_peak_sustained_elapsed')}, "
        f"L1 {_pct(k, 'l1tex__throughput.avg.pct_of_peak_sustained_active')}",
        f"  occupancy achieved {_pct(k, 'sm__warps_active.avg.pct_of_peak_sustained_active')} of theoretical "
        f"{_pct(k, 'sm__maximum_warps_per_active_cycle_pct')}",
    ]
    if stalls:
        lines.append("  top stalls (cycles per issued instruction): " + ", ".join(f"{r} {v:.1f}" for r, v in stalls))
    return "\n".join(lines)


def summarize(kernels: list[KernelCounters], max_tokens: int) -> str:
    """The report the model reads: one block per kernel, cut to ``max_tokens`` (:func:`count_tokens`)."""
    if not kernels:
        return "ncu profiled no kernel of yours on this input set (did forward launch your kernels?)"
    head = f"Nsight Compute, clocks as when timed, one input set: {len(kernels)} kernel launch(es)"
    text = head
    for i, k in enumerate(kernels):
        block = format_kernel(k)
        if count_tokens(text + "\n" + block) > max_tokens:
            return text + f"\n(+{len(kernels) - i} more launch(es) left out: token budget {max_tokens})"
        text += "\n" + block
    return text


def base_names(names: list[str]) -> list[str]:
    """Plain function names of demangled kernel names (namespaces, templates and parameters dropped)."""
    from cuda_agent.harness.integrity.runtime import base_kernel_name

    out = []
    for n in names:
        base = base_kernel_name(n).split("::")[-1]
        if base and re.fullmatch(r"[A-Za-z_]\w*", base) and base not in out:
            out.append(base)
    return out


def ncu_command(exe: str, log: Path, names: list[str], max_kernels: int) -> list[str]:
    """The ncu wrapper of one profiled runner."""
    cmd = [exe, "--clock-control", "none", "--target-processes", "all", "--metrics", ",".join(METRICS)]
    for section in SECTIONS:
        cmd += ["--section", section]
    cmd += ["--csv", "--page", "raw", "--print-units", "base", "--launch-count", str(max_kernels),
            "--log-file", str(log)]
    if names:
        cmd += ["--kernel-name-base", "function", "--kernel-name", "regex:^(" + "|".join(names) + ")$"]
    return cmd


def profile_counters(evaluator: Evaluator, task: TaskManifest, root: Path, so_path: Path | None,
                     kernel_names: list[str], *, time_limit_s: float, max_kernels: int = 4) -> list[KernelCounters]:
    """Run the candidate once under ncu (see the module docstring); raises :class:`NcuRefused` with the reason."""
    from cuda_agent.harness.runner_client import CandidateFailed, RunnerClient
    from cuda_agent.harness.sandbox import CandidateDied
    from cuda_agent.harness.session import Session

    if evaluator.kind != "cuda":
        raise NcuRefused(f"ncu reads NVIDIA GPU counters; this backend runs on {evaluator.kind}")
    exe = ncu_path()
    if exe is None:
        raise NcuRefused("ncu (Nsight Compute) is not installed here (PATH, $CUDA_HOME/bin)")
    ctx = evaluator.context("verify")
    pool = evaluator.runners("verify")
    names = base_names(kernel_names)
    try:
        proc = pool.start_wrapped(lambda exchange: ncu_command(exe, exchange / "ncu.csv", names, max_kernels))
    except CandidateDied as exc:  # ncu refused to start the runner (an option, the driver)
        raise NcuRefused(f"ncu could not start the profiled runner: {exc}"
                         + (f" ({PERMISSION_ERROR})" if PERMISSION_ERROR in str(exc) else "")) from exc
    try:
        ref = evaluator.references.acquire(task)
        try:
            limits = ctx.settings.limits
            runner = RunnerClient(proc, call_timeout_s=time_limit_s, load_timeout_s=limits.load_timeout_s,
                                  request_timeout_s=time_limit_s)
            sess = Session(ctx, task, runner, ref)
            try:
                sess.open(root, so_path, [secrets.randbits(31)])
                with ctx.lock:  # nothing else on the device while the kernels are replayed
                    sess.call(sess.sets.indices()[0], check=False)
                pool.finish(proc, time_limit_s)
            finally:
                if ref.alive and len(sess.sets):
                    sess.sets.drop()
        finally:
            evaluator.references.release(ref)
    except CandidateDied as exc:
        _refuse_on_permission(proc)
        if exc.reason == "timeout":
            raise NcuRefused(f"ncu did not finish within {time_limit_s:.0f} s (the tool's time limit)") from exc
        raise NcuRefused(f"the profiled run ended early: {exc}") from exc
    except CandidateFailed as exc:
        _refuse_on_permission(proc)
        raise NcuRefused(f"the profiled call failed: {exc}") from exc
    finally:
        text = _read(proc.exchange / "ncu.csv")
        tail = proc.output_tail()
        pool.release(proc)
    return read_report(text, tail)


def read_report(log: str, output: str = "") -> list[KernelCounters]:
    """The kernels of an ncu log; :class:`NcuRefused` when ncu could not read counters (permission) or reported
    errors and no kernel."""
    if PERMISSION_ERROR in log or PERMISSION_ERROR in output:
        raise NcuRefused(_PERMISSION)
    kernels = parse_ncu_csv(log)
    if not kernels and "==ERROR==" in log + output:
        errors = [ln for ln in (log + "\n" + output).splitlines() if "==ERROR==" in ln]
        raise NcuRefused("ncu reported: " + " ".join(errors[:3])[:600])
    return kernels


_PERMISSION = (f"ncu cannot read the GPU's performance counters here ({PERMISSION_ERROR}): the driver allows them "
               "to administrators only, and candidates run as an unprivileged user in the sandbox. An operator can "
               "allow them (NVreg_RestrictProfilingToAdminUsers=0); until then use the profile tool's timings.")


def _refuse_on_permission(proc: object) -> None:
    text = _read(proc.exchange / "ncu.csv") + proc.output_tail()  # type: ignore[attr-defined]
    if PERMISSION_ERROR in text:
        raise NcuRefused(_PERMISSION)


def _read(path: Path, limit: int = 1 << 20) -> str:
    try:
        with open(path, "rb") as f:  # written inside the sandbox: bounded, as bytes
            return f.read(limit).decode(errors="replace")
    except OSError:
        return ""
