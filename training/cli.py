"""``cuda-agent train -c FILE [-c FILE...] [-o key=value...]``: run or resume the configured stage chain.

Multi-GPU / multi-node: launch this same command under the ``deepspeed``
launcher, e.g. ``deepspeed --num_gpus 2 --module cuda_agent.cli train -c
configs/train/paper.yaml`` (or ``deepspeed --num_gpus 2 $(which cuda-agent)
train ...``); the launcher sets RANK/WORLD_SIZE/LOCAL_RANK and every rank
runs the same stages with ZeRO sharding.
"""

from __future__ import annotations

import argparse
import json
import sys

from cuda_agent.config import load_config
from cuda_agent.errors import CudaAgentError


def register_command(subparsers) -> None:
    """Add the ``train`` subcommand."""
    p = subparsers.add_parser("train", help="train with the configured stages (ppo_single_turn, rft, value_pretrain, ppo_agentic)",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-c", "--config", action="append", default=[], help="YAML config file (repeatable, merged in order)")
    p.add_argument("-o", "--override", action="append", default=[], help="dotted override key=value (repeatable)")
    p.add_argument("--only", action="append", default=None, help="run only this stage id or name (repeatable)")
    p.add_argument("--local_rank", type=int, default=None, help=argparse.SUPPRESS)  # passed by the deepspeed launcher
    p.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    """Load the config, run the chain, print the final outputs as JSON."""
    from cuda_agent.training.config import TrainConfig
    from cuda_agent.training.runner import run_training

    try:
        config = load_config(TrainConfig, args.config, args.override)
        if args.only:
            config.only = list(args.only)
        outputs = run_training(config)
    except CudaAgentError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    import torch.distributed as dist

    if not dist.is_initialized() or dist.get_rank() == 0:
        print(json.dumps({k: v for k, v in outputs.items()}, indent=1, default=str))
    return 0
