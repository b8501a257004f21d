"""Where a machine's CPU time goes while a run works, by kind of process (builds, candidate runners, reference
processes, generation, the run itself), sampled from ``/proc``.

A learning run on the H200's 16 cores runs ~50 processes beside each other (three seeds, each with its generation
child, 16 episodes, their builds, runners and reference processes); its ``load_1min`` stayed at 30-40 (session 21),
so where the CPU goes bounds how fast episodes end. This sampler reads every process's CPU seconds each
``--interval`` seconds and credits the growth since the last look to the kind named by the process's command line
(:data:`KINDS`, first match wins). A process that ends between two looks loses at most one interval of its CPU time
(about one second per short build step at the default interval); the machine's total from ``/proc/stat`` shows
what the sampler missed (``unattributed_s``).

    python benchmarks/cpu_sampler.py --out cpu.jsonl --interval 1 --report-every 30 &   # until killed
    python benchmarks/cpu_sampler.py --summarize cpu.jsonl                               # totals of a file

Each report line is JSON: the seconds since start, the machine's CPU seconds in that window (``total_s``), the
seconds per kind, the live processes per kind, and the 1-minute load. Linux only (``/proc``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import sys
import time
from pathlib import Path
from typing import Any

#: (kind, pattern on the command line); the first pattern that matches names the process's kind.
KINDS: tuple[tuple[str, str], ...] = (
    ("build", r"(^|/)(nvcc|cicc|ptxas|cudafe\+\+|fatbinary|nvlink|cc1plus|cc1|g\+\+|gcc|c\+\+|ld|ld\.gold|as|ninja)( |$)"),
    ("runner", r"cuda_agent\.harness\.candidate_runner"),
    ("reference", r"cuda_agent\.harness\.reference"),
    ("inductor", r"torch/_inductor|compile_worker|triton"),
    ("generation", r"multiprocessing\.spawn|rollout-engine"),
    ("sanitizer", r"compute-sanitizer|ncu( |$)"),
    ("run", r"learning_curve\.py|cuda-agent|cuda_agent|pytest|benchmarks/"),
)
_COMPILED = tuple((kind, re.compile(pattern)) for kind, pattern in KINDS)
_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def kind_of(cmdline: str) -> str:
    """The kind of a process with this command line (``other`` when no pattern matches)."""
    for kind, pattern in _COMPILED:
        if pattern.search(cmdline):
            return kind
    return "other"


def _cpu_seconds(pid: str) -> tuple[float, int] | None:
    """user + system CPU seconds of a live process and its start time in ticks (None when it is gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2:].split()  # after "pid (comm) "
    return (int(fields[11]) + int(fields[12])) / _TICK, int(fields[19])  # utime + stime, starttime


def _cmdline(pid: str) -> str:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return ""
    return raw.replace(b"\0", b" ").decode(errors="replace").strip()


def _machine_cpu_seconds() -> float:
    """All CPUs' busy seconds (user, nice, system, irq, softirq, steal) since boot."""
    first = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in first[:8])
    return (user + nice + system + irq + softirq + steal) / _TICK


class Sampler:
    """Credits the CPU growth of every process to its kind between two :meth:`look` calls."""

    def __init__(self) -> None:
        self.seen: dict[tuple[str, int], tuple[str, float]] = {}  # (pid, start) -> (kind, CPU s at the last look)
        self.window: dict[str, float] = {}
        self.live: dict[str, int] = {}
        self.machine0 = _machine_cpu_seconds()
        self.me = str(os.getpid())
        self.started = False  # the first look only learns what runs; later ones credit new processes' CPU in full

    def look(self) -> None:
        """Read every process once; add its CPU growth since the last look to its kind."""
        live: dict[str, int] = {}
        current: dict[tuple[str, int], tuple[str, float]] = {}
        for pid in os.listdir("/proc"):
            if not pid.isdigit() or pid == self.me:
                continue
            stat = _cpu_seconds(pid)
            if stat is None:
                continue
            cpu, started = stat
            key = (pid, started)  # a reused pid is another process
            known = self.seen.get(key)
            # The command line is read at every look: a child forked by a run and not yet exec'd has its parent's.
            kind = kind_of(_cmdline(pid)) if known is None or known[0] in ("run", "other") else known[0]
            # A process first seen now: its CPU so far counts too, unless it predates the sampler (first look).
            grown = cpu - known[1] if known is not None else (cpu if self.started else 0.0)
            if grown > 0:
                self.window[kind] = self.window.get(kind, 0.0) + grown
            current[key] = (kind, cpu)
            live[kind] = live.get(kind, 0) + 1
        self.seen, self.live = current, live

    def report(self, elapsed_s: float) -> dict[str, Any]:
        """The window's seconds per kind (then reset), the machine's CPU seconds in it, the live processes."""
        machine = _machine_cpu_seconds()
        total = machine - self.machine0
        attributed = sum(self.window.values())
        line = {"elapsed_s": round(elapsed_s, 1), "total_s": round(total, 1),
                "kinds_s": {k: round(v, 1) for k, v in sorted(self.window.items(), key=lambda kv: -kv[1])},
                "unattributed_s": round(max(0.0, total - attributed), 1), "live": dict(sorted(self.live.items())),
                "load_1min": round(os.getloadavg()[0], 1), "cpus": os.cpu_count()}
        self.window, self.machine0 = {}, machine
        return line


def summarize(lines: list[dict[str, Any]]) -> dict[str, Any]:
    """Totals of a sampler file: machine CPU seconds, seconds and share per kind, the mean load."""
    total = sum(x["total_s"] for x in lines)
    kinds: dict[str, float] = {}
    for x in lines:
        for k, v in x["kinds_s"].items():
            kinds[k] = kinds.get(k, 0.0) + v
    kinds["unattributed"] = sum(x["unattributed_s"] for x in lines)
    wall = lines[-1]["elapsed_s"] if lines else 0.0
    return {"wall_s": wall, "total_cpu_s": round(total, 1),
            "mean_busy_cpus": round(total / wall, 2) if wall else 0.0,
            "kinds_s": {k: round(v, 1) for k, v in sorted(kinds.items(), key=lambda kv: -kv[1])},
            "kinds_share": {k: round(v / total, 3) for k, v in sorted(kinds.items(), key=lambda kv: -kv[1])} if total else {},
            "mean_load_1min": round(sum(x["load_1min"] for x in lines) / len(lines), 1) if lines else 0.0}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, help="JSON lines file to append the reports to")
    parser.add_argument("--interval", type=float, default=1.0, help="seconds between two looks at /proc")
    parser.add_argument("--report-every", type=float, default=30.0, help="seconds between two report lines")
    parser.add_argument("--duration", type=float, default=None, help="stop after this many seconds (default: killed)")
    parser.add_argument("--summarize", type=Path, help="print the totals of an existing report file and exit")
    args = parser.parse_args(argv)
    if args.summarize is not None:
        lines = [json.loads(x) for x in args.summarize.read_text().splitlines() if x.strip()]
        print(json.dumps(summarize(lines), indent=1))
        return 0
    if args.out is None:
        parser.error("--out is required unless --summarize is given")
    if not Path("/proc/stat").exists():
        print("cpu_sampler: /proc is not available (Linux only)", file=sys.stderr)
        return 2
    stop = [False]
    signal.signal(signal.SIGTERM, lambda *_: stop.__setitem__(0, True))
    signal.signal(signal.SIGINT, lambda *_: stop.__setitem__(0, True))
    sampler = Sampler()
    sampler.look()
    sampler.started = True
    t0 = last = time.monotonic()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("a") as fh:
        while not stop[0] and (args.duration is None or time.monotonic() - t0 < args.duration):
            time.sleep(args.interval)
            sampler.look()
            now = time.monotonic()
            if now - last >= args.report_every:
                fh.write(json.dumps(sampler.report(now - t0)) + "\n")
                fh.flush()
                last = now
        sampler.look()
        fh.write(json.dumps(sampler.report(time.monotonic() - t0)) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
