"""report.md: the headline, a table per task, exit reasons, levels, cost, budget points, provenance.

Numbers are rounded for reading (rates in percent with one decimal, speedups as ``1.79x``, seconds with one
decimal); a missing number reads as an en dash, never as ``None``. report.json keeps the exact values.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

#: Exits that say the policy or the harness failed (they count as failures, and eval can retry them).
ERROR_EXITS = ("runner_error", "policy_error", "error")


def fmt(value: Any, *, pct: bool = False, x: bool = False, digits: int = 2) -> str:
    """A number for reading: '–' when missing, '75.0%' with ``pct``, '1.79x' with ``x``, else rounded."""
    if value is None:
        return "–"
    if pct:
        return f"{100 * value:.1f}%"
    if x:
        return f"{value:.{digits}f}x"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _table(header: Sequence[str], rows: list[Sequence[str]]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header), *("| " + " | ".join(r) + " |" for r in rows)]


def _headline(report: dict[str, Any]) -> list[str]:
    rows = []
    for run in report["runs"]:
        for mode, m in run["metrics"].items():
            t = m["in_trajectory"]["overall"]
            if m["regraded"] is None:
                rows.append([run["name"], mode, str(m["n_episodes"]), f"not regraded ({fmt(t['pass_rate'], pct=True)})",
                             f"({fmt(t['faster_than_eager_rate'], pct=True)})", f"({fmt(t['faster_than_compile_rate'], pct=True)})",
                             f"({fmt(t['geomean_speedup_eager'], x=True)})", f"({fmt(t['geomean_speedup_compile'], x=True)})",
                             "–", "–"])
                continue
            r, h = m["regraded"]["overall"], m["hidden"]
            rows.append([
                run["name"], mode, str(m["n_episodes"]),
                f"{fmt(r['pass_rate'], pct=True)} ({fmt(t['pass_rate'], pct=True)})",
                f"{fmt(r['faster_than_eager_rate'], pct=True)} ({fmt(t['faster_than_eager_rate'], pct=True)})",
                f"{fmt(r['faster_than_compile_rate'], pct=True)} ({fmt(t['faster_than_compile_rate'], pct=True)})",
                f"{fmt(r['geomean_speedup_eager'], x=True)} ({fmt(t['geomean_speedup_eager'], x=True)})",
                f"{fmt(r['geomean_speedup_compile'], x=True)} ({fmt(t['geomean_speedup_compile'], x=True)})",
                f"{fmt(h['heldout_false_pass_rate'], pct=True)} ({h['heldout_failed']}/{h['heldout_checked']})",
                f"{fmt(h['widened_false_pass_rate'], pct=True)} ({h['widened_failed']}/{h['widened_checked']})",
            ])
    return ["## Headline (trusted regrading; in-trajectory in parentheses)", "",
            *_table(["run", "selection", "episodes", "pass", "> eager", "> compile", "geomean vs eager",
                     "geomean vs compile", "held-out false pass", "widened false pass"], rows)]


def _tasks(report: dict[str, Any]) -> list[str]:
    rows = []
    for run in report["runs"]:
        for t in run["tasks"]:
            rows.append([run["name"], t["task_id"], fmt(t["level"]), str(t["episodes"]), t["status"],
                         fmt(t["speedup_eager"], x=True), fmt(t["speedup_compile"], x=True), fmt(t["turns"], digits=0),
                         fmt(t["tokens"], digits=0), fmt(t["device_s"], digits=1), fmt(t["wall_s"], digits=1)])
    return ["## Per task (best-of-trajectory; speedups of correct candidates, median over seeds)", "",
            *_table(["run", "task", "level", "episodes", "status", "vs eager", "vs compile", "turns",
                     "tokens", "device s", "wall s"], rows)]


def _exits(report: dict[str, Any]) -> list[str]:
    rows, failures = [], []
    for run in report["runs"]:
        for exit, n in run["metrics"]["best"]["exits"].items():
            rows.append([run["name"], exit, str(n)])
        for ep in run["episodes"]:
            if ep["exit"] in ERROR_EXITS:
                failures.append(f"- {run['name']} `{ep['task_id']}` seed {ep['seed_index']}: **{ep['exit']}**: "
                                f"{(ep['message'] or '').splitlines()[0][:300] if ep['message'] else '(no message)'}")
    lines = ["## Exit reasons", "", *_table(["run", "exit", "episodes"], rows)]
    if failures:
        lines += ["", "Episodes that ended in an error (failures here; `-o eval.retry_errors=true` runs them again):",
                  "", *failures[:50]]
        if len(failures) > 50:
            lines.append(f"- ... {len(failures) - 50} more (report.json lists every episode)")
    return lines


def _levels(report: dict[str, Any]) -> list[str]:
    rows = []
    for run in report["runs"]:
        regraded = run["metrics"]["best"]["regraded"]
        for lvl, b in (regraded["per_level"] if regraded else {}).items():
            ms = b["milestones"]
            rows.append([run["name"], lvl, str(b["n"]), fmt(b["pass_rate"], pct=True), fmt(b["faster_than_eager_rate"], pct=True),
                         fmt(b["faster_than_compile_rate"], pct=True), fmt(b["geomean_speedup_eager"], x=True),
                         fmt(b["geomean_speedup_compile"], x=True), f"{ms['-1']}/{ms['1']}/{ms['2']}/{ms['3']}"])
    return ["## Per level (best-of-trajectory, regraded)", "",
            *_table(["run", "level", "episodes", "pass", "> eager", "> compile", "geomean vs eager",
                     "geomean vs compile", "milestones -1/1/2/3"], rows)]


def _cost(report: dict[str, Any]) -> list[str]:
    with_queue = any(run["queue"] for run in report["runs"])
    rows = []
    for run in report["runs"]:
        m = run["metrics"]["best"]
        c, tt = m["cost"], m["turns_to_best"]
        s = m["seeds"]["pass_rate"] or {"mean": None, "std": None, "min": None, "max": None}
        row = [run["name"], f"{fmt(c['wall_s_per_episode']['mean'], digits=1)}, {fmt(c['wall_s_per_episode']['median'], digits=1)}",
               fmt(c["tokens_per_episode"]["mean"], digits=0), fmt(c["gpu_s_per_episode"]["mean"], digits=1),
               f"{fmt(tt['median'], digits=1)} [{fmt(tt['q1'], digits=1)}, {fmt(tt['q3'], digits=1)}]",
               f"{fmt(s['mean'], pct=True)} ± {fmt(s['std'], pct=True)} [{fmt(s['min'], pct=True)}, {fmt(s['max'], pct=True)}]"]
        if with_queue:
            queue = run["queue"] or {"devices": {}}
            row.append(", ".join(f"dev{k}: {fmt(v['utilisation'], pct=True)}" for k, v in queue["devices"].items()) or "–")
        rows.append(row)
    header = ["run", "wall s / episode (mean, median)", "tokens / episode", "device s / episode",
              "turns to best (median [q1, q3])", "pass rate over seeds (mean ± std [min, max])"]
    return ["## Cost, turns to best, spread over seeds (best-of-trajectory)", "",
            *_table(header + (["GPU-queue utilisation"] if with_queue else []), rows)]


def _budget(report: dict[str, Any]) -> list[str]:
    lines = ["## Budget curve (best of the first k turns)", ""]
    for run in report["runs"]:
        bc = run["metrics"]["best"]["budget_curve"]
        if not bc["turns"]:
            continue
        turns = bc["turns"]
        if bc["source"] == "regraded":
            picks = list(range(len(turns)))
            how = "trusted regrades at each budget point"
        else:
            picks = sorted({0, len(turns) // 4, len(turns) // 2, len(turns) - 1})
            how = "from the agent's own tool results: this run has no budget regrades"
        cells = "; ".join(f"k={turns[i]}: {fmt(bc['pass_rate'][i], pct=True)} pass, "
                          f"{fmt(bc['faster_than_eager_rate'][i], pct=True)} > eager, "
                          f"{fmt(bc['faster_than_compile_rate'][i], pct=True)} > compile" for i in picks)
        lines.append(f"- {run['name']} ({how}): {cells}")
    return lines


def _provenance(report: dict[str, Any]) -> list[str]:
    lines = ["## Provenance", ""]
    for run in report["runs"]:
        p = run["provenance"]
        lines.append(f"- **{run['name']}** ({run['path']}): config {fmt(p['config_hash'])}, policy `{fmt(p['policy'])}`, "
                     f"backend `{fmt(p['backend'])}`, tasks `{fmt(p['tasks'])}`, max turns {fmt(p['max_turns'])}, "
                     f"{p['episodes_finished']} episodes finished, {run['episodes_unfinished']} unfinished")
        if p["system_prompt_hashes"]:
            lines.append(f"  - system prompt (skill + tool schemas): {', '.join(p['system_prompt_hashes'])}")
        if p["plugins"]:
            lines.append("  - plugins: " + ", ".join(f"{name} ({dist})" for name, dist in sorted(p["plugins"].items())))
        for mach in p["machines"]:
            lines.append("  - " + ", ".join(f"{k}={v}" for k, v in mach.items() if v))
    return lines


def render_markdown(report: dict[str, Any], plot_files: Sequence[str] = ()) -> str:
    """report.md (see the module doc)."""
    lines = ["# cuda-agent evaluation report", "", report["generated_by"], ""]
    for warning in report.get("warnings", []):
        lines += [f"> **Warning:** {warning}", ""]
    for section in (_headline, _tasks, _exits, _levels, _cost, _budget, _provenance):
        lines += section(report) + [""]
    lines += ["## Definitions", ""] + [f"- **{k}**: {v}" for k, v in report["definitions"].items()]
    if plot_files:
        lines += ["", "## Plots", ""] + [f"![{Path(f).stem}]({Path(f).name})" for f in plot_files]
    return "\n".join(lines) + "\n"
