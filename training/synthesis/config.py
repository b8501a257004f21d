"""``DataConfig``: the configuration of ``cuda-agent data`` (YAML + ``-o`` overrides)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from cuda_agent.config import StrictModel
from cuda_agent.training.synthesis.compose_rules import ComposeSettings
from cuda_agent.training.synthesis.dedup import DedupSettings
from cuda_agent.training.synthesis.execution_probe import ProbeSettings

#: The execution filters in the order a task meets them.
DEFAULT_FILTERS = ["runs", "deterministic", "informative", "runtime_window", "memory", "cpu_sizes"]


class MineSettings(StrictModel):
    """Seed operator mining."""

    include_torch: bool = Field(True, description="Mine torch (tensor ops, nn.functional, nn modules).")
    include_transformers: bool = Field(True, description="Mine transformers (activations, RMS norms, rotary helpers).")
    catalog: Path | None = Field(None, description="Use this operator catalog (JSONL of OperatorSpec) instead of mining.")


class DataConfig(StrictModel):
    """Configuration of a data synthesis build."""

    out_dir: Path = Field(Path("runs/data"), description="Folder of the stage logs and outputs (tasks.jsonl, dropped.jsonl, summary.json).")
    seed: int = Field(0, description="Composition seed: candidate i depends only on (seed, i).")
    composer: Literal["rules", "llm"] = Field("rules", description="'rules': shape-aware offline composer; 'llm': a policy composes sampled operators.")
    policy: str | None = Field(None, description="Policy spec for the llm composer (NAME[:TARGET][?k=v]); any registered policy.")
    compose_template: Path | None = Field(None, description="jinja2 prompt template for the llm composer; None = the packaged compose.j2.")
    target_tasks: int = Field(50, ge=1, description="Stop composing once this many tasks survive filters and dedup.")
    max_candidates: int = Field(400, ge=1, description="Candidates composed at most (the build stops there even if short of target).")
    round_size: int = Field(40, ge=1, description="Candidates composed and filtered per round before checking the target.")
    workers: int = Field(2, ge=1, description="Probe workers running tasks in parallel (each a separate process).")
    cpu_check_workers: int = Field(1, ge=1, description="CPU probe workers running each kept task's CPU_SIZES variant (for the 'cpu_sizes' filter).")
    devices: list[int] = Field(default_factory=list, description="GPU indices for probe.device 'cuda' (workers spread round-robin); empty = all visible.")
    mine: MineSettings = Field(default_factory=MineSettings, description="Operator mining.")
    compose: ComposeSettings = Field(default_factory=ComposeSettings, description="Composition (op counts, family weights, sizes).")
    probe: ProbeSettings = Field(default_factory=ProbeSettings, description="How tasks are executed and measured.")
    filters: list[str] = Field(default_factory=lambda: list(DEFAULT_FILTERS), description="Task filter plugins applied, in order (the first failing one is the drop reason).")
    plugins: dict[str, dict[str, Any]] = Field(default_factory=dict, description="Config blocks of the filters (and the policy), keyed by component name.")
    dedup: DedupSettings = Field(default_factory=DedupSettings, description="Decontamination and near-duplicate settings.")
    progress: bool = Field(True, description="Show rich progress bars.")
