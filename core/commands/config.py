"""``cuda-agent config show [-c FILE] [-o k=v]``: the resolved configuration as YAML, secrets redacted."""

from __future__ import annotations

import argparse
import importlib

import yaml

from cuda_agent.cli import add_config_options
from cuda_agent.config import RunConfig, load_config, resolved
from cuda_agent.errors import ConfigError


def register_command(subparsers) -> None:
    """Add ``config show``."""
    p = subparsers.add_parser("config", help="Inspect configuration.")
    sub = p.add_subparsers(dest="config_command", metavar="SUBCOMMAND", required=True)
    show = sub.add_parser("show", help="Print the resolved config (YAML, secrets redacted).")
    show.add_argument("--model", default=None, metavar="MODULE:CLASS",
                      help="Config model to resolve (default cuda_agent.config:RunConfig; eval/train have their own).")
    add_config_options(show)
    show.set_defaults(func=handle_show)


def config_model(spec: str | None) -> type:
    """The config model class named ``MODULE:CLASS``."""
    if spec is None:
        return RunConfig
    module_name, _, cls_name = spec.partition(":")
    try:
        return getattr(importlib.import_module(module_name), cls_name)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"--model {spec}: cannot load it ({exc}); expected MODULE:CLASS") from exc


def handle_show(args: argparse.Namespace) -> int:
    """Print the YAML."""
    config = load_config(config_model(args.model), args.config, args.override)
    print(yaml.safe_dump(resolved(config), sort_keys=False), end="")
    return 0
