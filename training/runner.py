"""Run the chain of stages of a :class:`TrainConfig` (what ``cuda-agent train`` calls).

Each stage runs in ``<run_dir>/<index>_<name>`` and receives the merged
outputs of the stages before it (``actor``, ``critic`` paths). Finished
stages are skipped on a re-run, an unfinished one resumes from its newest
checkpoint; the resolved config is saved as ``train_config.json`` and a
re-run with a different one is refused with the differences listed. Every
stage to run is built (its config validated) and asked to ``preflight``
before the first one trains, so e.g. a missing vLLM fails at once, not hours in.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import structlog
import torch

from cuda_agent.config import config_diff, resolved
from cuda_agent.errors import ConfigError
from cuda_agent.plugin_manager import PluginManager
from cuda_agent.protocols import StageContext
from cuda_agent.training.config import TrainConfig
from cuda_agent.training.engines.deepspeed_engine import ensure_distributed

log = structlog.get_logger("cuda_agent.training")

#: Keys that may differ between a run and its resumption.
RESUME_FREE_KEYS = ("only",)


def stage_ids(config: TrainConfig) -> list[str]:
    """Folder names of the stages, in order."""
    return [s.id or f"{i}_{s.name}" for i, s in enumerate(config.stages)]


def check_resume_config(run_dir: Path, config: TrainConfig) -> None:
    """Save the resolved config, or refuse if a different one was saved before."""
    import torch.distributed as dist

    path = run_dir / "train_config.json"
    current = {k: v for k, v in resolved(config).items() if k not in RESUME_FREE_KEYS}
    rank0 = not dist.is_initialized() or dist.get_rank() == 0
    if rank0 and not path.exists():
        run_dir.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(current, indent=1, sort_keys=True))
        tmp.replace(path)
        current_written = True
    else:
        current_written = False
    if dist.is_initialized() and dist.get_world_size() > 1:
        dist.barrier()
    if current_written:
        return
    if path.exists():
        saved = json.loads(path.read_text())
        diff = config_diff(saved, current)
        if diff:
            raise ConfigError(
                f"{run_dir} holds a run with a different configuration; use another run_dir or the same config. "
                "Differences:\n  " + "\n  ".join(diff)
            )
        return


def run_training(config: TrainConfig, pm: PluginManager | None = None) -> dict[str, Any]:
    """Run (or resume) every stage; returns the merged outputs of the last stage run."""
    pm = pm or PluginManager(disable=config.disable)
    if config.torch_threads:
        torch.set_num_threads(config.torch_threads)
    if config.deterministic:
        torch.use_deterministic_algorithms(True, warn_only=True)
        # DeepSpeed allocates large communication buckets with torch.empty; NaN-filling them costs seconds per step.
        torch.utils.deterministic.fill_uninitialized_memory = False
    run_dir = Path(config.run_dir)
    ensure_distributed()  # under the deepspeed launcher every rank joins here; alone, a 1-process group
    check_resume_config(run_dir, config)
    ids = stage_ids(config)
    for spec in config.stages:
        pm.registry.get("stage", spec.name, where="stages[].name")
    if config.only:
        unknown = [o for o in config.only if o not in ids and o not in {s.name for s in config.stages}]
        if unknown:
            raise ConfigError(f"only: unknown stage(s) {unknown}; valid ids: {', '.join(ids)}")
    to_run = {sid for sid, spec in zip(ids, config.stages)
              if not config.only or sid in config.only or spec.name in config.only}
    stages = {sid: pm.registry.build("stage", spec.name, spec.config, where=f"stages[{sid}].config")
              for sid, spec in zip(ids, config.stages) if sid in to_run}
    for sid, stage in stages.items():  # refuse what cannot run here before the first stage trains
        preflight = getattr(stage, "preflight", None)
        if preflight is not None:
            preflight(f"stages[{sid}].config")
    inputs: dict[str, Any] = {}
    for sid, spec in zip(ids, config.stages):
        stage_dir = run_dir / sid
        if sid not in to_run:
            prev = stage_dir / "outputs.json"
            if prev.exists():
                inputs = {**inputs, **json.loads(prev.read_text())}
            log.info("stage skipped", stage=sid, reason="not in 'only'", has_outputs=prev.exists())
            continue
        log.info("stage start", stage=sid)
        outputs = stages[sid].run(StageContext(run_dir=stage_dir, config=config, plugin_manager=pm, inputs=dict(inputs), resume=True))
        inputs = {**inputs, **outputs}
        log.info("stage done", stage=sid, outputs={k: v for k, v in outputs.items() if k != "metrics"})
    return inputs
