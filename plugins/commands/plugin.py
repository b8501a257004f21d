"""Command ``plugin new``: a plugin package to start from (a backend, a reward or a tool), with its entry point,
the hookspec version it is written for, and tests that run cuda-agent's conformance kit."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Any

from cuda_agent.hookspecs import hookimpl


def write_package(name: str, kind: str, dest: Path) -> list[Path]:
    """Write the package ``name`` (a ``kind`` plugin) into the new folder ``dest``; the files written.

    :raises ValueError: an invalid name or kind, or ``dest`` exists and is not empty.
    """
    from cuda_agent import HOOKSPEC_VERSION
    from cuda_agent.plugins.commands._plugin_templates import FILES, PYPROJECT, README

    if kind not in FILES:
        raise ValueError(f"unknown plugin kind {kind!r}; valid: {', '.join(FILES)}")
    if not re.fullmatch(r"[a-z][a-z0-9_-]*", name):
        raise ValueError(f"plugin name {name!r}: lowercase letters, digits, '-' and '_', starting with a letter")
    if dest.exists() and any(dest.iterdir()):
        raise ValueError(f"{dest} exists and is not empty; choose a new folder")
    module = name.replace("-", "_")
    values = {"name": name, "module": module, "version": HOOKSPEC_VERSION, "kind": kind}
    files = {"pyproject.toml": PYPROJECT, "README.md": README, "{module}/__init__.py": '"""{name}."""\n',
             **FILES[kind]}
    written = []
    for rel, template in files.items():
        path = dest / rel.format(**values)
        path.parent.mkdir(parents=True, exist_ok=True)
        text = template.format(**values)
        if kind != "backend" and rel == "pyproject.toml":
            text = text.replace(f'\n[tool.setuptools.package-data]\n{module} = ["SKILL.md"]\n', "")
        path.write_text(text)
        written.append(path)
    return written


def handle(args: argparse.Namespace) -> int:
    """``cuda-agent plugin new NAME``."""
    dest = args.out or Path(args.name)
    try:
        written = write_package(args.name, args.kind, dest)
    except ValueError as exc:
        print(f"cuda-agent plugin new: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {len(written)} files to {dest} ({args.kind} plugin); next: pip install -e {dest} && "
          f"python -m pytest {dest / 'tests'}")
    return 0


def add_parser(subparsers: Any) -> None:
    """Add ``plugin new``."""
    p = subparsers.add_parser("plugin", help="Start a plugin package (cuda-agent plugin new NAME --kind backend).")
    sub = p.add_subparsers(dest="plugin_command", metavar="SUBCOMMAND", required=True)
    new = sub.add_parser("new", help="Write a plugin package declaring the hookspec version it is written for.")
    new.add_argument("name", help="Distribution name, e.g. 'acme-backend' (module acme_backend).")
    new.add_argument("--kind", choices=["backend", "reward", "tool"], default="backend", help="What it registers.")
    new.add_argument("--out", type=Path, default=None, help="Folder to create (default: ./NAME).")
    new.set_defaults(func=handle)


@hookimpl
def register_commands(register) -> None:
    """Register ``plugin``."""
    register("plugin", add_parser, description="Start a plugin package from a template (plugin new).")
