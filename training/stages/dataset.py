"""Episode datasets of the supervised stages: collected once, saved, reloaded on resume.

RFT and value pretraining train on a fixed set of episodes. They are
collected before step 1 (from the current actor, or read from trajectory
files) and saved to ``<stage>/episodes.pt``, so a resumed run trains on
exactly the same data.
"""

from __future__ import annotations

import glob
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch

from cuda_agent.errors import ConfigError
from cuda_agent.training.buffers import Episode, episode_from_trajectory
from cuda_agent.training.stages.runtime import StageRuntime


def episodes_from_files(patterns: list[str]) -> list[Episode]:
    """Episodes of every ``trajectory.jsonl`` matched by the glob patterns (sorted, complete ones)."""
    files = sorted({f for p in patterns for f in glob.glob(p, recursive=True)})
    out = []
    for f in files:
        ep = episode_from_trajectory(f)
        if not ep.meta.get("incomplete"):
            out.append(ep)
    return out


def collect_or_load(rt: StageRuntime, source: Any, actor: Any, n: int, files: list[str]) -> list[Episode]:
    """The stage's episode set: loaded from ``episodes.pt`` if saved, else collected and saved."""
    path = rt.dir / ("episodes.pt" if rt.rank == 0 else f"episodes.rank{rt.rank}.pt")
    if path.exists() and rt.ctx.resume:
        return [Episode(**d) for d in torch.load(path, weights_only=False)]
    episodes = episodes_from_files(files) if files else []
    if n > 0:
        episodes += source.collect(actor, n, 0, rt.generator(0, "collect"))
    if not episodes:
        raise ConfigError(f"stage {rt.name!r}: no episodes (set 'collect_episodes' > 0 or 'trajectories' globs that match files)")
    tmp = path.with_suffix(".tmp")
    torch.save([asdict(e) for e in episodes], tmp)
    Path(tmp).replace(path)
    return episodes


def minibatch_indices(n: int, batch_size: int, step: int, base_seed: int) -> list[int]:
    """Indices of step ``step``'s minibatch: epochs of seeded permutations, ``batch_size`` at a time."""
    per_epoch = max(1, -(-n // batch_size))
    epoch, k = divmod(step - 1, per_epoch)
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(base_seed + epoch)).tolist()
    return perm[k * batch_size : (k + 1) * batch_size]
