"""PNG plots of a report: budget curves, speedup distribution per level, cost vs speedup.

matplotlib with the Agg backend (no display needed); runs side by side in
one figure each, axes labelled, a legend per run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def _pyplot():  # imported lazily: listing plugins and loading reports must stay fast
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _speedup_axis(ax) -> None:
    """Log-scale y axis labelled '0.5x', '1x', '2x' (plus '1.5x'-style ticks on narrow ranges); call after plotting."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    ax.set_yscale("log")
    lo, hi = ax.get_ylim()
    subs = (1.0, 1.5) if lo > 0 and hi / lo < 6 else (1.0,)
    ax.yaxis.set_major_locator(LogLocator(base=2, subs=subs))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:.3g}x" if v < 100 else f"{v:,.0f}x"))
    ax.yaxis.set_minor_formatter(NullFormatter())


def plot_budget_curves(report: dict[str, Any], dest: Path) -> Path:
    """Pass rate and faster-than-compile rate against the turn budget, one line per run."""
    plt = _pyplot()
    from matplotlib.ticker import MaxNLocator

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.5))
    panels = [("pass_rate", "pass rate"), ("faster_than_eager_rate", "faster than eager (>1.0x)"),
              ("faster_than_compile_rate", "faster than torch.compile (>1.0x)")]
    for ax, (key, title) in zip(axes, panels):
        for run in report["runs"]:
            bc = run["metrics"]["best"]["budget_curve"]
            if bc:
                ax.plot(bc["turns"], [100 * (v or 0) for v in bc[key]], marker="o", ms=3, drawstyle="steps-post",
                        label=run["name"])
        ax.set_xlabel("turn budget k (best of first k turns)")
        ax.set_ylabel("% of episodes")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_title(title)
        ax.set_ylim(-3, 103)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle("Budget curves (in-trajectory tool results)")
    fig.tight_layout()
    path = dest / "budget_curves.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_speedup_by_level(report: dict[str, Any], dest: Path) -> Path:
    """Regraded speedup vs torch.compile of correct best-of-trajectory candidates, per level and run."""
    plt = _pyplot()
    runs = report["runs"]
    levels = sorted({ep.level if ep.level is not None else 0 for run in runs for ep in run["_summaries"]})
    fig, ax = plt.subplots(figsize=(max(8, 2.2 * len(levels) * max(1, len(runs))), 4.5))
    width = 0.8 / max(1, len(runs))
    for r_i, run in enumerate(runs):
        data, positions = [], []
        for l_i, lvl in enumerate(levels):
            vals = []
            for ep in run["_summaries"]:
                o = ep.selections.get("best")
                if (ep.level or 0) == lvl and o and o.regraded and o.regraded.passed and o.regraded.speedup_compile:
                    vals.append(o.regraded.speedup_compile)
            data.append(vals or [float("nan")])
            positions.append(l_i + (r_i - (len(runs) - 1) / 2) * width)
        bp = ax.boxplot(data, positions=positions, widths=width * 0.9, patch_artist=True, manage_ticks=False)
        color = f"C{r_i}"
        for box in bp["boxes"]:
            box.set_facecolor(color)
            box.set_alpha(0.45)
        for pos, vals in zip(positions, data):
            ax.scatter([pos] * len(vals), vals, s=12, color=color, zorder=3)
        ax.plot([], [], color=color, lw=6, alpha=0.45, label=run["name"])
    ax.axhline(1.0, color="grey", ls="--", lw=1, label="torch.compile (1.0x)")
    ax.set_xticks(range(len(levels)))
    ax.set_xticklabels([f"level {lvl}" if lvl else "no level" for lvl in levels])
    _speedup_axis(ax)
    ax.set_xlabel("task level")
    ax.set_ylabel("speedup vs torch.compile (regraded, log scale)")
    ax.set_title("Speedup of correct best-of-trajectory candidates per level")
    ax.grid(alpha=0.3, axis="y")
    ax.legend(fontsize=8)
    fig.tight_layout()
    path = dest / "speedup_by_level.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _best_compile_speedup(ep: Any) -> float | None:
    """The regraded speedup vs torch.compile of an episode's correct best-of-trajectory candidate, else None."""
    o = ep.selections.get("best")
    if o and o.regraded and o.regraded.passed and o.regraded.speedup_compile:
        return float(o.regraded.speedup_compile)
    return None


def failure_floor(speedups: list[float]) -> float:
    """Where episodes without a correct candidate are drawn on a log speedup axis: 0.1x, or half the slowest
    correct speedup when one is below that (so a failure never sits among correct candidates)."""
    return min([0.1] + [s / 2 for s in speedups if s > 0])


def plot_cost_vs_speedup(report: dict[str, Any], dest: Path) -> Path:
    """Per episode: device seconds and tokens spent against the regraded speedup (failures at the bottom)."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    speedups = [_best_compile_speedup(ep) for run in report["runs"] for ep in run["_summaries"]]
    floor = failure_floor([s for s in speedups if s is not None])
    for r_i, run in enumerate(report["runs"]):
        for ax, attr, label in ((axes[0], "gpu_s", "device seconds per episode"),
                                (axes[1], "tokens", "tokens per episode")):
            ok_x, ok_y, bad_x = [], [], []
            for ep in run["_summaries"]:
                x, speedup = float(getattr(ep, attr)), _best_compile_speedup(ep)
                if speedup is not None:
                    ok_x.append(x)
                    ok_y.append(speedup)
                else:
                    bad_x.append(x)
            if ok_x:
                ax.scatter(ok_x, ok_y, color=f"C{r_i}", s=20, label=f"{run['name']} correct")
            if bad_x:
                ax.scatter(bad_x, [floor] * len(bad_x), color=f"C{r_i}", marker="x", s=20,
                           label=f"{run['name']} not correct (plotted at {floor:.3g}x)")
            ax.set_xlabel(label)
    for ax in axes:
        ax.axhline(1.0, color="grey", ls="--", lw=1)
        _speedup_axis(ax)
        ax.set_ylabel("speedup vs torch.compile (regraded, log)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle("Cost vs speedup (best-of-trajectory)")
    fig.tight_layout()
    path = dest / "cost_vs_speedup.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def render_plots(report: dict[str, Any], dest: Path) -> list[Path]:
    """Every plot of the report, written under ``dest``; returns their paths."""
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    return [plot_budget_curves(report, dest), plot_speedup_by_level(report, dest), plot_cost_vs_speedup(report, dest)]
