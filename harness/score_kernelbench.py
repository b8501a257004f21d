"""``score`` over KernelBench's own layouts: run folders, samples per problem, KernelBench's ``fast_p``.

``cuda-agent score RUN_FOLDER --tasks 'kernelbench:KB[?levels=1&sizes=reduced]'``: every
``level_{L}_problem_{P}_sample_{S}_kernel.py`` of the run folder (KernelBench's own file names, no renaming)
is a single-file solution of problem ``P`` of level ``L`` of the checkout ``KB`` (``P`` is the number before
the first underscore of the problem file, ``19`` for ``19_ReLU.py``). Solutions named by the problem
(``<stem>.py`` or a ``<stem>/`` workspace, e.g. ``19_ReLU.py``) are mapped too, as sample 0.

Several samples of one problem are graded one by one and reported per problem as ``best`` (a correct sample
first, then the highest speedup vs eager) and ``all``. Beside our metrics the summary reports KernelBench's
``fast_p`` under its own name: the fraction of problems whose solution is correct and faster than the eager
PyTorch baseline by more than ``p`` (speedup = baseline time / solution time > ``p``; ``fast_0`` is the
correctness rate), over the problems scored, with each problem's best sample (``fast_p``) and averaged over
samples (``fast_p_mean_over_samples``). Every row names the KernelBench commit and the problem file's hash.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cuda_agent.harness.kernelbench_tasks import RUN_FILE, problem_number
from cuda_agent.schemas.task import TaskManifest

#: The ``p`` thresholds reported (KernelBench reports fast_0, fast_1 and others).
FAST_P_THRESHOLDS: tuple[float, ...] = (0.0, 0.5, 0.8, 1.0, 1.5, 2.0)


@dataclass(frozen=True)
class ProblemSolution:
    """One solution file or workspace mapped to its KernelBench problem."""

    name: str
    path: Path
    level: int
    problem: int
    sample: int


def is_kernelbench_spec(tasks: str | Path) -> bool:
    """Whether ``--tasks`` names a KernelBench checkout (``kernelbench:PATH[?...]``)."""
    return str(tasks).startswith("kernelbench:")


def problem_index(spec: str) -> dict[tuple[int, int], TaskManifest]:
    """(level, problem number) -> manifest of every problem the ``kernelbench:`` spec selects (levels 1-3 default)."""
    from cuda_agent.harness.evaluation.task_sources import iter_kernelbench
    from cuda_agent.specs import parse_spec

    parsed = parse_spec(spec, kind="task source")
    if parsed.target is None:
        raise ValueError(f"--tasks {spec!r}: expected kernelbench:PATH[?levels=1,2&ids=...&sizes=reduced]")
    params = dict(parsed.params)
    unknown = sorted(set(params) - {"levels", "ids", "sizes"})
    if unknown:
        raise ValueError(f"--tasks {spec!r}: unknown parameter(s) {', '.join(unknown)}; valid: levels, ids, sizes")
    tasks = iter_kernelbench(Path(parsed.target), params.get("levels", "1,2,3"), params.get("ids"),
                             params.get("sizes", "full"))
    return {(t.level or 0, problem_number(t.name) or -1): t for t in tasks}


def map_solutions(solutions: Path, index: dict[tuple[int, int], TaskManifest]
                  ) -> tuple[list[ProblemSolution], list[tuple[str, str]]]:
    """Solutions of a run folder mapped to problems; (name, reason) of those that map to none."""
    by_stem = {t.name: key for key, t in index.items()}
    mapped: list[ProblemSolution] = []
    unmapped: list[tuple[str, str]] = []
    for p in sorted(solutions.iterdir()):
        if p.name.startswith((".", "_")) or not (p.is_dir() or p.suffix == ".py"):
            continue
        m = RUN_FILE.match(p.name)
        if m:
            level, problem, sample = (int(g) for g in m.groups())
            if (level, problem) in index:
                mapped.append(ProblemSolution(p.stem, p, level, problem, sample))
            else:
                unmapped.append((p.stem, f"{p.name}: no problem {problem} of level {level} in the task source"))
            continue
        stem = p.stem if p.is_file() else p.name
        if stem in by_stem:
            level, problem = by_stem[stem]
            mapped.append(ProblemSolution(stem, p, level, problem, 0))
        else:
            unmapped.append((stem, f"{p.name}: neither level_L_problem_P_sample_S_kernel.py nor a problem file's name"))
    mapped.sort(key=lambda s: (s.level, s.problem, s.sample, s.name))
    return mapped, unmapped


def provenance(task: TaskManifest) -> dict[str, Any]:
    """The KernelBench facts every row on a problem records."""
    up = task.upstream
    return {
        "problem_id": task.id,
        "commit": up.commit if up else None,
        "file": up.path if up else None,
        "file_sha256": up.file_sha256 if up else None,
        "sizes": task.meta.get("sizes", "full"),
        "comparable_to_published": task.meta.get("comparable_to_published", True),
    }


def _rank(row: dict[str, Any]) -> tuple[int, float]:
    return (1 if row["status"] == "correct" else 0, row.get("speedup_eager") or 0.0)


def _fast(row: dict[str, Any], p: float) -> bool:
    return row["status"] == "correct" and (row.get("speedup_eager") or 0.0) > p


def kernelbench_summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per-problem best and all samples, and KernelBench's fast_p (best sample, and mean over samples)."""
    problems: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        if r.get("kernelbench"):
            problems.setdefault(r["kernelbench"]["problem_id"], []).append(r)
    per_problem = {}
    for pid, samples in sorted(problems.items()):
        best = max(samples, key=_rank)
        per_problem[pid] = {
            "best": {"solution": best["task"], "sample": best["kernelbench"]["sample"], "status": best["status"],
                     "speedup_eager": best.get("speedup_eager"), "speedup_compile": best.get("speedup_compile")},
            "all": [{"solution": s["task"], "sample": s["kernelbench"]["sample"], "status": s["status"],
                     "speedup_eager": s.get("speedup_eager")} for s in samples],
        }
    n = len(problems)

    def label(p: float) -> str:
        return f"fast_{p:g}"

    fast_p = {label(p): round(sum(_fast(max(s, key=_rank), p) for s in problems.values()) / n, 4) if n else None
              for p in FAST_P_THRESHOLDS}
    fast_mean = {label(p): round(sum(sum(_fast(r, p) for r in s) / len(s) for s in problems.values()) / n, 4)
                 if n else None for p in FAST_P_THRESHOLDS}
    reduced = any(not r["kernelbench"]["comparable_to_published"] for s in problems.values() for r in s)
    commits = sorted({str(r["kernelbench"]["commit"]) for s in problems.values() for r in s})
    return {
        "problems": n,
        "samples": sum(len(s) for s in problems.values()),
        "commits": commits,
        "fast_p": fast_p,
        "fast_p_definition": "fraction of problems whose (best) solution is correct and t_eager / t_solution > p",
        "fast_p_mean_over_samples": fast_mean,
        "comparable_to_published": not reduced,
        "per_problem": per_problem,
    }


def render_kernelbench_markdown(summary: dict[str, Any]) -> str:
    """The KernelBench part of report.md: fast_p and the per-problem best sample."""
    fast = ", ".join(f"{k} {v}" for k, v in summary["fast_p"].items())
    lines = ["", f"## KernelBench ({summary['problems']} problem(s), {summary['samples']} sample(s), "
             f"commit {', '.join(c[:12] for c in summary['commits'])})", "",
             f"KernelBench's fast_p (best sample per problem): {fast}."]
    if not summary["comparable_to_published"]:
        lines.append("Reduced sizes: these figures are NOT comparable to published KernelBench numbers.")
    lines += ["", "| problem | best sample | status | speedup eager | samples (status) |", "|---|---|---|---|---|"]
    for pid, entry in summary["per_problem"].items():
        b = entry["best"]
        all_s = " ".join(f"{s['sample']}:{s['status']}" for s in entry["all"])
        lines.append(f"| {pid} | {b['sample']} | {b['status']} | {b['speedup_eager'] if b['speedup_eager'] is not None else ''}"
                     f" | {all_s} |")
    return "\n".join(lines) + "\n"


def sort_key(name: str) -> tuple[Any, ...]:
    """Natural order of run-folder names (problem 2 before problem 10)."""
    return tuple(int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name))
