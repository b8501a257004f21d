"""``cuda-agent config show [-c FILE] [-o k=v]``: the resolved configuration as YAML, validated, secrets redacted.

Beyond the config model's own validation it checks what a run would meet first: every selected component
(policy, backend, reward, tools) is registered and enabled, a component is not both selected and disabled,
and every ``plugins.<name>`` block validates against its component's model. The selected components' blocks
are printed with their defaults filled in, so a user sees every setting a run will use.
"""

from __future__ import annotations

import argparse
import importlib

import yaml

from cuda_agent.cli import add_config_options, make_plugin_manager
from cuda_agent.components import check_components
from cuda_agent.config import RunConfig, load_config, resolved
from cuda_agent.errors import ConfigError
from cuda_agent.secrets import redact


def register_command(subparsers) -> None:
    """Add ``config show``."""
    p = subparsers.add_parser("config", help="Inspect configuration.")
    sub = p.add_subparsers(dest="config_command", metavar="SUBCOMMAND", required=True)
    show = sub.add_parser("show", help="Print the resolved config (YAML, validated, plugin defaults filled in, secrets redacted).")
    show.add_argument("--model", default=None, metavar="MODULE:CLASS",
                      help="Config model to resolve (default cuda_agent.config:RunConfig; eval/train have their own).")
    add_config_options(show)
    show.set_defaults(func=handle_show)


def config_model(spec: str | None) -> type:
    """The config model class named ``MODULE:CLASS`` (a name the user gives)."""
    if spec is None:
        return RunConfig
    module_name, _, cls_name = spec.partition(":")
    try:
        return getattr(importlib.import_module(module_name), cls_name)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"--model {spec}: cannot load it ({exc}); expected MODULE:CLASS") from exc


def handle_show(args: argparse.Namespace) -> int:
    """Validate, then print the YAML."""
    config = load_config(config_model(args.model), args.config, args.override)
    shown = resolved(config)
    if isinstance(config, RunConfig):
        effective = check_components(config, make_plugin_manager(args, config))
        shown["plugins"] = {**shown.get("plugins", {}), **redact({k: v for k, v in effective.items() if v})}
    print("# resolved config; plugins: every selected component's block with its defaults filled in")
    print(yaml.safe_dump(shown, sort_keys=False), end="")
    return 0
