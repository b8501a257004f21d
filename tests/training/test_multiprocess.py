"""Two data-parallel ranks on CPU (gloo): what the ``deepspeed`` launcher does on 2 GPUs, minus the GPUs.

Each rank is a ``cuda-agent train`` process with the launcher's environment
(RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT); ZeRO-2 shards the
optimizer over both, checkpoints hold both ranks' shards, and a second run
of the same command finds the finished stage and exits at once.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
STAGES = ("stages=[{name: ppo_single_turn, config: {env: toy_single, steps: 2, episodes_per_step: 8, "
          "actor_lr: 0.003, critic_lr: 0.003, checkpoint_every: 1}}]")


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _launch(run_dir: Path, world: int = 2) -> list[subprocess.CompletedProcess]:
    port = _port()
    procs = []
    for rank in range(world):
        env = {**os.environ, "RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": str(world),
               "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "OMP_NUM_THREADS": "1"}
        cmd = [sys.executable, "-m", "cuda_agent.cli", "train", "-c", str(ROOT / "configs/train/ci_toy_chain.yaml"),
               "-o", f"run_dir={run_dir}", "-o", STAGES]
        procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    out = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=1200)
        out.append(subprocess.CompletedProcess(p.args, p.returncode, stdout, stderr))
    return out


@pytest.mark.slow
def test_two_ranks_train_checkpoint_and_resume_on_cpu(tmp_path):
    res = _launch(tmp_path)
    for r in res:
        assert r.returncode == 0, r.stderr[-3000:]
    stage = tmp_path / "0_ppo_single_turn"
    outputs = json.loads((stage / "outputs.json").read_text())
    assert Path(outputs["actor"], "model.safetensors").exists()
    shards = sorted(p.name for p in (stage / "checkpoints" / "step_2" / "actor" / "ckpt").iterdir())
    assert any("rank_1" in s for s in shards) and any("rank_0" in s for s in shards), shards
    assert (stage / "episodes.pt").exists() is False  # PPO keeps no dataset; RFT/value stages write one per rank
    again = _launch(tmp_path)
    assert all(r.returncode == 0 for r in again)
    assert json.loads(again[0].stdout[again[0].stdout.index("{"):])["actor"] == outputs["actor"]
