"""``cuda-agent plugins [--json]``: every loaded plugin with hooks, distribution, version, components."""

from __future__ import annotations

import argparse
import json

from cuda_agent.cli import add_config_options, make_plugin_manager
from cuda_agent.config import RunConfig, load_config


def register_command(subparsers) -> None:
    """Add ``plugins``."""
    p = subparsers.add_parser("plugins", help="List loaded plugins.")
    p.add_argument("--json", action="store_true", help="Print JSON instead of a table.")
    add_config_options(p)
    p.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    """Print the plugin list."""
    config = load_config(RunConfig, args.config, args.override)
    pm = make_plugin_manager(args, config)
    infos = [p.as_dict() for p in pm.plugins()]
    skipped = [{"kind": k, "name": n, "plugin": p} for k, n, p in pm.registry.skipped()]
    if args.json:
        print(json.dumps({"plugins": infos, "disabled": sorted(pm.disabled), "skipped": skipped}, indent=2))
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table(title="cuda-agent plugins")
    for col in ("plugin", "distribution", "version", "hooks", "components"):
        table.add_column(col)
    for info in infos:
        table.add_row(info["name"], info["distribution"], info["version"], "\n".join(info["hooks"]),
                      "\n".join(info["components"]))
    console = Console()
    console.print(table)
    if pm.disabled:
        console.print(f"disabled: {', '.join(sorted(pm.disabled))}")
    return 0
