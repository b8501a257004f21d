"""``cuda-agent data mine | compose | filter | dedup | build``.

Every subcommand takes ``-c FILE`` (repeatable) and ``-o key=value``
(repeatable), loads a :class:`~cuda_agent.training.synthesis.config.DataConfig`
and works in its ``out_dir``; stages skip what the logs there mark done.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from cuda_agent.config import load_config
from cuda_agent.errors import CudaAgentError


def _pipeline(args: argparse.Namespace) -> Any:
    from cuda_agent.training.synthesis.config import DataConfig
    from cuda_agent.training.synthesis.pipeline import DataPipeline

    config = load_config(DataConfig, args.config or [], args.override or [])
    if getattr(args, "no_progress", False):
        config = config.model_copy(update={"progress": False})
    return DataPipeline(config)


def _print(summary: Any) -> None:
    print(json.dumps(summary, indent=1, sort_keys=True, default=str))


def cmd_mine(args: argparse.Namespace) -> int:
    """Mine the operator catalog."""
    pipe = _pipeline(args)
    specs = pipe.mine()
    _print({"operators": len(specs), "catalog": str(pipe.out / "operators.jsonl")})
    return 0


def cmd_compose(args: argparse.Namespace) -> int:
    """Compose candidates 0 .. max_candidates-1."""
    pipe = _pipeline(args)
    log = pipe.compose(range(pipe.config.max_candidates), pipe.mine())
    errors = sum(1 for r in log.records.values() if r.get("error"))
    _print({"composed": len(log.records), "compose_errors": errors})
    return 0


def cmd_filter(args: argparse.Namespace) -> int:
    """Probe and judge every composed candidate not yet filtered."""
    from cuda_agent.training.synthesis.jsonl_log import JsonlLog

    pipe = _pipeline(args)
    composed = JsonlLog(pipe.out / "composed.jsonl")
    try:
        filtered = pipe.filter(composed, sorted(composed.records))
    finally:
        pipe.close()
    _print(pipe.dedup(composed, filtered) if args.summary else {"filtered": len(filtered.records)})
    return 0


def cmd_dedup(args: argparse.Namespace) -> int:
    """Decontaminate and deduplicate the filtered tasks; rewrite the outputs."""
    from cuda_agent.training.synthesis.jsonl_log import JsonlLog

    pipe = _pipeline(args)
    _print(pipe.dedup(JsonlLog(pipe.out / "composed.jsonl"), JsonlLog(pipe.out / "filtered.jsonl")))
    return 0


def cmd_build(args: argparse.Namespace) -> int:
    """All stages, in rounds, until the target count is met."""
    _print(_pipeline(args).build())
    return 0


def _wrap(fn: Any) -> Any:
    def handler(args: argparse.Namespace) -> int:
        try:
            return fn(args)
        except (CudaAgentError, FileNotFoundError, ValueError) as exc:
            print(f"cuda-agent data {args.data_command}: {exc}")
            return 2

    return handler


def register_command(subparsers: Any) -> None:
    """Add ``data`` and its subcommands to the ``cuda-agent`` parser."""
    data = subparsers.add_parser("data", help="Synthesize training tasks: mine, compose, filter, dedup, build.")
    sub = data.add_subparsers(dest="data_command", required=True)
    for name, fn in (("mine", cmd_mine), ("compose", cmd_compose), ("filter", cmd_filter), ("dedup", cmd_dedup),
                     ("build", cmd_build)):
        p = sub.add_parser(name, help=(fn.__doc__ or "").strip())
        p.add_argument("-c", "--config", action="append", help="YAML config file (repeatable, merged in order).")
        p.add_argument("-o", "--override", action="append", help="Dotted override key=value (repeatable).")
        p.add_argument("--no-progress", action="store_true", help="Hide progress bars.")
        if name == "filter":
            p.add_argument("--summary", action="store_true", help="Also rewrite outputs and print the summary.")
        p.set_defaults(func=_wrap(fn))
