"""``TrainConfig``: the configuration of ``cuda-agent train`` (YAML + ``-o`` overrides).

It extends :class:`cuda_agent.config.RunConfig` (policy/backend/reward/agent
settings are what the kernel environment's episodes run with) with the model,
the DeepSpeed settings and the chain of stages. Each stage's ``config`` block
is validated by that stage's own config model (``plugins/stages/*.py``).
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from cuda_agent.config import RunConfig, StrictModel
from cuda_agent.training.settings import EngineSettings


class StageSpec(StrictModel):
    """One stage of the chain."""

    name: str = Field(description="Registered stage name: ppo_single_turn, rft, value_pretrain, ppo_agentic, or a plugin's.")
    id: str | None = Field(None, description="Folder name of this stage in the run (default '<index>_<name>').")
    config: dict[str, Any] = Field(default_factory=dict, description="The stage's config block (validated by the stage's model).")


class TrainConfig(RunConfig):
    """Configuration of ``cuda-agent train``."""

    run_dir: str = Field("runs/train", description="Output folder: stage folders, checkpoints, metrics, exported models.")
    model: str | dict[str, Any] = Field(
        description="Initial actor: a save_pretrained folder, or a config dict with model_type (random init, no download)."
    )
    tokenizer: str | None = Field(
        None, description="Folder with the tokenizer (kernel environment only); default: the model folder."
    )
    model_seed: int = Field(0, description="Seed of a random-init model built from a config dict.")
    engine: EngineSettings = Field(default_factory=EngineSettings, description="DeepSpeed settings of every engine.")
    stages: list[StageSpec] = Field(min_length=1, description="Stages run in order; each gets the previous one's outputs.")
    only: list[str] | None = Field(None, description="Run only these stage ids/names (the others must have finished, or be skipped).")
    loggers: list[str] = Field(default_factory=lambda: ["jsonl"], description="Metric logger plugins (jsonl writes <run_dir>/metrics.jsonl).")
    torch_threads: int | None = Field(None, ge=1, description="torch.set_num_threads for CPU runs; None = torch's default.")
    deterministic: bool = Field(False, description="torch.use_deterministic_algorithms(warn_only): bitwise-stable GPU kernels (CPU runs are deterministic already).")
