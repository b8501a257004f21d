"""``cuda-agent ablate``: evaluation-time ablations, one eval per variant, one comparison table.

Variants come from ``--leave-one-out A,B,...`` (each name left out in turn;
besides plugin/component names given to ``disable``, two names switch a
setting instead: ``skill`` -> ``agent.use_skill=false`` and ``loop`` ->
``agent.mode=single_turn``, the paper's "no agent loop") or from
``--variants FILE``: YAML, either a list of ``{name: ..., set: {dotted.key: value}}``
or a mapping ``name -> {dotted.key: value}``. A ``base`` variant (no change)
always runs first. Each variant's eval goes to ``OUT/<name>/`` (resumable,
like any eval), then one report over all of them to ``OUT/report/``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cuda_agent.config import load_config
from cuda_agent.errors import ConfigError
from cuda_agent.harness.evaluation.config import EvalConfig

#: Leave-one-out names that switch a setting rather than disable a component.
SETTING_ABLATIONS: dict[str, list[str]] = {
    "skill": ["agent.use_skill=false"],
    "loop": ["agent.mode=single_turn"],
}


@dataclass
class Variant:
    """One ablation variant: a name and the overrides applied on top of the base config."""

    name: str
    overrides: list[str] = field(default_factory=list)
    disable: list[str] = field(default_factory=list)


def _yaml_value(value: Any) -> str:
    import yaml

    return yaml.safe_dump(value, default_flow_style=True).strip().removesuffix("...").strip()


def leave_one_out(names: Sequence[str]) -> list[Variant]:
    """``base`` plus one variant per name, named ``no_<name>``."""
    out = [Variant("base")]
    for name in names:
        name = name.strip()
        if not name:
            continue
        if name in SETTING_ABLATIONS:
            out.append(Variant(f"no_{name}", overrides=list(SETTING_ABLATIONS[name])))
        else:
            out.append(Variant(f"no_{name.replace(':', '_').replace('.', '_')}", disable=[name]))
    return out


def variants_from_file(path: Path) -> list[Variant]:
    """``base`` plus the variants of a YAML file (a list of {name, set} or a mapping name -> deltas)."""
    import yaml

    data = yaml.safe_load(Path(path).read_text())
    items: list[tuple[str, dict[str, Any]]] = []
    if isinstance(data, dict):
        items = [(str(k), v or {}) for k, v in data.items()]
    elif isinstance(data, list):
        for i, entry in enumerate(data):
            if not isinstance(entry, dict) or "name" not in entry:
                raise ConfigError(f"{path}: variant {i} must be a mapping with 'name' and 'set' keys, got {entry!r}")
            items.append((str(entry["name"]), entry.get("set") or {}))
    else:
        raise ConfigError(f"{path}: expected a list of {{name, set}} or a mapping name -> deltas")
    out = [Variant("base")]
    for name, deltas in items:
        if not isinstance(deltas, dict):
            raise ConfigError(f"{path}: deltas of variant {name!r} must be a mapping of dotted keys to values")
        out.append(Variant(name, overrides=[f"{k}={_yaml_value(v)}" for k, v in deltas.items()]))
    names = [v.name for v in out]
    if len(set(names)) != len(names):
        raise ConfigError(f"{path}: variant names must be unique (and not 'base'); got {names}")
    return out


def variant_config(files: Sequence[str], overrides: Sequence[str], variant: Variant) -> EvalConfig:
    """The base config (files + overrides) with the variant applied."""
    base = load_config(EvalConfig, files, overrides)
    cfg = load_config(EvalConfig, (), variant.overrides, base=base.model_dump(mode="json"))
    if variant.disable:
        cfg = cfg.model_copy(update={"disable": sorted(set(cfg.disable) | set(variant.disable))})
        EvalConfig.model_validate(cfg.model_dump())
    return cfg


def comparison_rows(report: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per variant (run) of the report: best-of-trajectory regraded headline and cost."""
    rows = []
    for run in report["runs"]:
        m = run["metrics"]["best"]
        r = (m["regraded"] or m["in_trajectory"])["overall"]  # in-trajectory when the run did not regrade 'best'
        hidden = m["hidden"] or {}
        rows.append({
            "variant": run["name"],
            "episodes": m["n_episodes"],
            "pass_rate": r["pass_rate"],
            "faster_than_eager_rate": r["faster_than_eager_rate"],
            "faster_than_compile_rate": r["faster_than_compile_rate"],
            "geomean_speedup_compile": r["geomean_speedup_compile"],
            "widened_false_pass_rate": hidden.get("widened_false_pass_rate"),
            "tokens_per_episode": m["cost"]["tokens_per_episode"]["mean"],
            "wall_s_per_episode": m["cost"]["wall_s_per_episode"]["mean"],
        })
    return rows


def format_table(rows: list[dict[str, Any]]) -> str:
    """A plain-text table of :func:`comparison_rows`."""
    def cell(key: str, v: Any) -> str:
        if v is None:
            return "-"
        if key.endswith("_rate"):
            return f"{100 * v:.1f}%"
        if isinstance(v, float):
            return f"{v:.3f}" if "speedup" in key else f"{v:.1f}"
        return str(v)

    if not rows:
        return "(no variants)"
    keys = list(rows[0])
    table = [keys] + [[cell(k, r[k]) for k in keys] for r in rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(keys))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths)) for row in table]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def run_ablation(
    files: Sequence[str],
    overrides: Sequence[str],
    variants: list[Variant],
    out_dir: Path,
    *,
    pm_factory: Callable[[EvalConfig], Any] | None = None,
) -> dict[str, Any]:
    """Run each variant's eval into ``out_dir/<name>``, then report them side by side; return the report.

    :param pm_factory: builds the plugin manager of a variant's config (default: ``PluginManager(disable=...)``).
    """
    from cuda_agent.harness.evaluation.report import write_report
    from cuda_agent.harness.evaluation.runner import EvalRunner

    out_dir = Path(out_dir)
    dirs = []
    for variant in variants:
        cfg = variant_config(files, overrides, variant)
        pm = pm_factory(cfg) if pm_factory is not None else None
        EvalRunner(cfg, out_dir / variant.name, plugin_manager=pm).run()
        dirs.append(out_dir / variant.name)
    return write_report(dirs, out_dir / "report")

