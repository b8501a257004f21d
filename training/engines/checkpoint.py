"""Checkpoints (model, optimizer, RNG, data cursor, step) and export of the actor to HF format.

Layout of one checkpoint: ``<dir>/step_<N>/`` holding DeepSpeed checkpoints
``actor/`` and ``critic/`` (model + optimizer, sharded as ZeRO left them),
``state.json`` (step, data cursor, metrics) and ``rng.pt`` (python, torch,
CUDA RNG states); a ``COMPLETE`` file is written last, so a checkpoint cut
by a kill is never loaded.
"""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path
from typing import Any

import torch

COMPLETE = "COMPLETE"


def _is_rank0() -> bool:
    import torch.distributed as dist

    return not dist.is_initialized() or dist.get_rank() == 0


def _barrier() -> None:
    import torch.distributed as dist

    if dist.is_initialized() and dist.get_world_size() > 1:
        dist.barrier()


def rng_state() -> dict[str, Any]:
    """Python and torch (CPU, CUDA) RNG states."""
    state: dict[str, Any] = {"python": random.getstate(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore what :func:`rng_state` returned."""
    random.setstate(state["python"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save_checkpoint(root: Path, step: int, engines: dict[str, Any], state: dict[str, Any], keep: int = 2) -> Path:
    """Save every engine and the trainer state as ``root/step_<step>``; keep the newest ``keep``."""
    path = Path(root) / f"step_{step}"
    for name, engine in engines.items():
        if engine is not None:
            engine.save_checkpoint(str(path / name), tag="ckpt", save_latest=False)
    if _is_rank0():
        (path / "state.json").write_text(json.dumps({"step": step, **state}, indent=1, sort_keys=True))
        torch.save(rng_state(), path / "rng.pt")
        (path / COMPLETE).write_text("ok\n")
        done = sorted(complete_checkpoints(root), key=lambda p: int(p.name.split("_")[1]))
        for old in done[:-keep] if keep > 0 else []:
            shutil.rmtree(old, ignore_errors=True)
    _barrier()
    return path


def complete_checkpoints(root: Path) -> list[Path]:
    """Checkpoint folders whose ``COMPLETE`` marker exists."""
    root = Path(root)
    if not root.exists():
        return []
    return [p for p in root.glob("step_*") if (p / COMPLETE).exists()]


def latest_checkpoint(root: Path) -> Path | None:
    """The newest complete checkpoint under ``root``, or None."""
    found = complete_checkpoints(root)
    return max(found, key=lambda p: int(p.name.split("_")[1])) if found else None


def load_checkpoint(path: Path, engines: dict[str, Any]) -> dict[str, Any]:
    """Load engines (model + optimizer) and RNG from ``path``; returns the saved trainer state."""
    path = Path(path)
    for name, engine in engines.items():
        if engine is None:
            continue
        load_path, _ = engine.load_checkpoint(str(path / name), tag="ckpt", load_optimizer_states=True,
                                              load_lr_scheduler_states=False)
        if load_path is None:
            raise FileNotFoundError(f"checkpoint {path / name} could not be loaded by DeepSpeed (missing or incomplete)")
    set_rng_state(torch.load(path / "rng.pt", weights_only=False))
    return json.loads((path / "state.json").read_text())


def full_state_dict(engine: Any) -> dict[str, torch.Tensor] | None:
    """The engine's module state dict, gathered from ZeRO-3 shards if needed (None on ranks > 0 for ZeRO-3)."""
    if engine.zero_optimization_stage() == 3:
        return engine._zero3_consolidated_16bit_state_dict()
    return {k: v.detach().cpu() for k, v in engine.module.state_dict().items()}


def export_actor_hf(engine: Any, out_dir: Path, tokenizer_dir: str | Path | None = None) -> Path:
    """Write the actor as a ``save_pretrained`` folder (weights gathered from ZeRO), plus the tokenizer files."""
    out_dir = Path(out_dir)
    sd = full_state_dict(engine)
    if _is_rank0():
        out_dir.mkdir(parents=True, exist_ok=True)
        engine.module.save_pretrained(str(out_dir), state_dict=sd)
        if tokenizer_dir is not None:
            copy_tokenizer(Path(tokenizer_dir), out_dir)
    _barrier()
    return out_dir


TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja",
                   "vocab.json", "merges.txt", "tiny_lm.json")


def copy_tokenizer(src: Path, dst: Path) -> None:
    """Copy tokenizer files (those present) from a model folder to an exported one."""
    for name in TOKENIZER_FILES:
        if (src / name).exists():
            shutil.copy2(src / name, dst / name)


def save_critic(engine: Any, path: Path) -> Path:
    """Save the critic's full state dict (backbone + value head) as one ``.pt`` file."""
    sd = full_state_dict(engine)
    if _is_rank0():
        path.parent.mkdir(parents=True, exist_ok=True)
        torch.save(sd, path)
    _barrier()
    return path
