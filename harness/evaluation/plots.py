"""PNG plots of a report: budget curves, speedups per level (eager beside compile), cost vs speedup.

matplotlib with the Agg backend (no display needed). Runs side by side in one figure each, every run with its
own colour, marker and line style, so two identical runs stay visible. Budget curves are drawn from the trusted
regrades at the budget points (the title says when a run only has in-trajectory numbers). Points carry task
labels where there are few of them; a run without levels gets one "all tasks" group of normal width.
The ``figure_*`` builders return the matplotlib figure (tests inspect them); :func:`render_plots` saves them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

#: Per-run styles: marker, line style (colour is the run's index in matplotlib's cycle).
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
LINESTYLES = ("-", "--", ":", "-.")
#: Points per group at most for drawing every task's label beside its point.
LABEL_LIMIT = 12
BASELINES = (("speedup_eager", "eager PyTorch"), ("speedup_compile", "torch.compile"))


def _pyplot():  # imported lazily: listing plugins and loading reports must stay fast
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def style(i: int) -> dict[str, Any]:
    """Colour, marker, line style and fill of run ``i`` (every other run hollow, so overlapping points both show)."""
    color = f"C{i % 10}"
    return {"color": color, "marker": MARKERS[i % len(MARKERS)], "linestyle": LINESTYLES[i % len(LINESTYLES)],
            "face": color if i % 2 == 0 else "none"}


def _scatter(ax, xs, ys, s: dict[str, Any], label: str | None) -> None:
    ax.scatter(xs, ys, s=42, marker=s["marker"], facecolors=s["face"], edgecolors=s["color"] if s["face"] == "none" else "black",
               linewidths=1.4 if s["face"] == "none" else 0.5, zorder=3, label=label)


def _speedup_axis(ax) -> None:
    """Log-scale y axis labelled '0.5x', '1x', '2x' (plus '1.5x'-style ticks on narrow ranges); call after plotting."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    ax.set_yscale("log")
    lo, hi = ax.get_ylim()
    subs = (1.0, 1.5) if lo > 0 and hi / lo < 6 else (1.0,)
    ax.yaxis.set_major_locator(LogLocator(base=2, subs=subs))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:.3g}x" if v < 100 else f"{v:,.0f}x"))
    ax.yaxis.set_minor_formatter(NullFormatter())


def _short(ep: Any, run: dict[str, Any]) -> str:
    """A point's label: the task's short name, with its seed when the run has several."""
    name = ep.task_id.rsplit("/", 1)[-1]
    seeds = {e.seed_index for e in run["_summaries"]}
    return f"{name} s{ep.seed_index}" if len(seeds) > 1 else name


def figure_budget_curves(report: dict[str, Any]):
    """Pass rate and faster-than-eager / faster-than-compile rates against the turn budget, one line per run."""
    plt = _pyplot()
    from matplotlib.ticker import MaxNLocator

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.6))
    panels = [("pass_rate", "pass rate"), ("faster_than_eager_rate", "faster than eager PyTorch (>1.0x)"),
              ("faster_than_compile_rate", "faster than torch.compile (>1.0x)")]
    sources = set()
    for ax, (key, title) in zip(axes, panels):
        for i, run in enumerate(report["runs"]):
            bc = run["metrics"]["best"]["budget_curve"]
            if not bc["turns"]:
                continue
            sources.add(bc["source"])
            regraded = bc["source"] == "regraded"
            s = style(i)
            ax.plot(bc["turns"], [100 * (v or 0) for v in bc[key]], color=s["color"], marker=s["marker"],
                    markerfacecolor=s["face"], linestyle=s["linestyle"], ms=7, lw=1.6,
                    drawstyle="default" if regraded else "steps-post",
                    alpha=0.85, label=f"{run['name']}" + ("" if regraded else " (in-trajectory)"))
        ax.set_xlabel("turn budget k (best of the first k turns)")
        ax.set_ylabel("% of episodes")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_title(title)
        ax.set_ylim(-3, 103)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    how = ("trusted regrades of the best candidate so far, at each budget point" if sources == {"regraded"}
           else "in-trajectory tool results where a run has no budget regrades")
    fig.suptitle(f"Budget curves ({how})")
    fig.tight_layout()
    return fig


def _correct_speedups(run: dict[str, Any], key: str, level: Any) -> list[tuple[float, str]]:
    out = []
    for ep in run["_summaries"]:
        o = ep.selections.get("best")
        v = getattr(o.regraded, key) if o and o.regraded and o.regraded.passed else None
        if (ep.level if level != "all" else "all") == level and v:
            out.append((float(v), _short(ep, run)))
    return out


def figure_speedup_by_level(report: dict[str, Any]):
    """Regraded speedups of correct best-of-trajectory candidates, vs eager and vs torch.compile, per level."""
    plt = _pyplot()
    runs = report["runs"]
    has_levels = any(ep.level is not None for run in runs for ep in run["_summaries"])
    levels: list[Any] = sorted({ep.level for run in runs for ep in run["_summaries"] if ep.level is not None}) \
        if has_levels else ["all"]
    width = 0.8 / max(1, len(runs))
    fig, axes = plt.subplots(1, 2, figsize=(max(10, 3.2 * len(levels) * max(1, len(runs))), 4.8), sharey=True)
    for ax, (key, baseline) in zip(axes, BASELINES):
        for r_i, run in enumerate(runs):
            s = style(r_i)
            for l_i, lvl in enumerate(levels):
                points = _correct_speedups(run, key, lvl)
                pos = l_i + (r_i - (len(runs) - 1) / 2) * width
                if len(points) >= 3:
                    bp = ax.boxplot([[v for v, _ in points]], positions=[pos], widths=width * 0.8, patch_artist=True,
                                    manage_ticks=False, showfliers=False,
                                    medianprops={"color": "black", "linewidth": 2.2})
                    bp["boxes"][0].set_facecolor(s["color"])
                    bp["boxes"][0].set_alpha(0.3)
                _scatter(ax, [pos] * len(points), [v for v, _ in points], s, run["name"] if l_i == 0 else None)
                if len(points) <= LABEL_LIMIT:
                    for v, name in points:
                        ax.annotate(name, (pos, v), xytext=(6, 0), textcoords="offset points", fontsize=7, va="center")
        ax.axhline(1.0, color="grey", ls="--", lw=1, label=f"{baseline} (1.0x)")
        ax.set_xticks(range(len(levels)))
        ax.set_xticklabels([f"level {lvl}" for lvl in levels] if has_levels else ["all tasks (no levels)"])
        ax.set_xlim(-0.6, len(levels) - 0.4)
        ax.set_xlabel("task level")
        ax.set_title(f"vs {baseline}")
        ax.grid(alpha=0.3, axis="y")
        ax.legend(fontsize=8)
    axes[0].set_ylabel("speedup (trusted regrade, log scale)")
    all_values = [v for ax in axes for coll in ax.collections for v in coll.get_offsets()[:, 1]] or [1.0]
    axes[0].set_ylim(min(min(all_values), 1.0) / 1.5, max(max(all_values), 1.0) * 1.5)
    for ax in axes:
        _speedup_axis(ax)
    fig.suptitle("Speedup of correct best-of-trajectory candidates (boxes with a black median line where a group has 3+)")
    fig.tight_layout()
    return fig


def _best_speedup(ep: Any, key: str = "speedup_compile") -> float | None:
    """The regraded speedup (``key``) of an episode's correct best-of-trajectory candidate, else None."""
    o = ep.selections.get("best")
    if o and o.regraded and o.regraded.passed and getattr(o.regraded, key):
        return float(getattr(o.regraded, key))
    return None


def failure_floor(speedups: list[float]) -> float:
    """Where episodes without a correct candidate are drawn on a log speedup axis: 0.1x, or half the slowest
    correct speedup when one is below that (so a failure never sits among correct candidates)."""
    return min([0.1] + [s / 2 for s in speedups if s > 0])


def figure_cost_vs_speedup(report: dict[str, Any]):
    """Per episode: device seconds and tokens spent against the regraded speedup vs eager and vs torch.compile."""
    plt = _pyplot()
    fig, axes = plt.subplots(2, 2, figsize=(12, 8.5))
    episodes = [ep for run in report["runs"] for ep in run["_summaries"]]
    few = len(episodes) <= LABEL_LIMIT
    for row, (key, baseline) in enumerate(BASELINES):
        floor = failure_floor([s for s in (_best_speedup(ep, key) for ep in episodes) if s is not None])
        for col, (attr, xlabel) in enumerate((("gpu_s", "device seconds per episode"), ("tokens", "tokens per episode"))):
            ax = axes[row][col]
            for r_i, run in enumerate(report["runs"]):
                s = style(r_i)
                ok = [(float(getattr(ep, attr)), _best_speedup(ep, key), _short(ep, run)) for ep in run["_summaries"]
                      if _best_speedup(ep, key) is not None]
                bad = [(float(getattr(ep, attr)), _short(ep, run)) for ep in run["_summaries"]
                       if _best_speedup(ep, key) is None]
                if ok:
                    _scatter(ax, [x for x, _, _ in ok], [y for _, y, _ in ok], s, f"{run['name']} correct")
                if bad:
                    ax.scatter([x for x, _ in bad], [floor] * len(bad), color=s["color"], marker="x", s=30,
                               label=f"{run['name']} not correct (drawn at {floor:.3g}x)")
                if few:
                    for x, y, name in ok:
                        ax.annotate(name, (x, y), xytext=(5, 3), textcoords="offset points", fontsize=7)
            ax.axhline(1.0, color="grey", ls="--", lw=1)
            ax.margins(x=0.15)
            ax.set_xlabel(xlabel)
            ax.set_ylabel(f"speedup vs {baseline} (log)")
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7)
            _speedup_axis(ax)
    fig.suptitle("Cost vs speedup (best-of-trajectory, trusted regrade)")
    fig.tight_layout()
    return fig


#: File name -> figure builder, in report order.
PLOTS = {"budget_curves.png": figure_budget_curves, "speedup_by_level.png": figure_speedup_by_level,
         "cost_vs_speedup.png": figure_cost_vs_speedup}


def render_plots(report: dict[str, Any], dest: Path) -> list[Path]:
    """Every plot of the report, written under ``dest``; returns their paths."""
    plt = _pyplot()
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, build in PLOTS.items():
        fig = build(report)
        fig.savefig(dest / name, dpi=110)
        plt.close(fig)
        paths.append(dest / name)
    return paths
