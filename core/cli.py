"""The ``cuda-agent`` command line.

Core commands (``run``, ``plugins``, ``config``, ``show``, ``doctor``) live in
:mod:`cuda_agent.commands`. Commands of other areas are loaded lazily by
dotted name from :data:`COMMAND_MODULES`: each module exposes
``register_command(subparsers) -> None`` adding its parser(s) with
``set_defaults(func=handler)``, ``handler(args) -> int``. Only the module of
the command being run is imported, so a broken or absent area cannot break
the others; it yields "command X is not available: <reason>".

Global options (before the command): ``-p MODULE`` loads an extra plugin
module by dotted name (repeatable; for local plugins without an entry point),
``--log-level``, ``--log-json``.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from typing import Any

from cuda_agent import __version__
from cuda_agent.errors import CudaAgentError

#: Command name -> module providing ``register_command(subparsers)``.
COMMAND_MODULES: dict[str, str] = {
    "run": "cuda_agent.commands.run",
    "plugins": "cuda_agent.commands.plugins",
    "config": "cuda_agent.commands.config",
    "show": "cuda_agent.commands.show",
    "doctor": "cuda_agent.commands.doctor",
    "score": "cuda_agent.harness.score_cli",
    "eval": "cuda_agent.harness.evaluation.cli",
    "report": "cuda_agent.harness.evaluation.cli",
    "ablate": "cuda_agent.harness.evaluation.cli",
    "data": "cuda_agent.training.synthesis.cli",
    "train": "cuda_agent.training.cli",
}


def add_config_options(parser: argparse.ArgumentParser) -> None:
    """The ``-c FILE`` / ``-o key=value`` options every command takes."""
    parser.add_argument("-c", "--config", action="append", default=[], metavar="FILE", help="YAML config file (repeatable, merged in order).")
    parser.add_argument("-o", "--override", action="append", default=[], metavar="KEY=VALUE", help="Dotted override, e.g. agent.max_turns=50 (repeatable).")


def make_plugin_manager(args: argparse.Namespace, config: Any, extra_plugins: Sequence[tuple[str, object]] = ()) -> Any:
    """A fresh plugin manager for ``config``, with ``-p`` extra plugin modules and ``extra_plugins``."""
    from cuda_agent.plugin_manager import PluginManager

    extra = list(extra_plugins)
    for dotted in getattr(args, "plugin", None) or []:
        try:
            extra.append((dotted, importlib.import_module(dotted)))
        except ImportError as exc:
            raise CudaAgentError(f"-p {dotted}: cannot import plugin module: {exc}") from exc
    return PluginManager(disable=getattr(config, "disable", ()), extra_plugins=extra)


def _selected_command(argv: Sequence[str]) -> str | None:
    skip_next = False
    for token in argv:
        if skip_next:
            skip_next = False
            continue
        if token in ("-p", "--plugin", "--log-level"):
            skip_next = True
            continue
        if not token.startswith("-"):
            return token
    return None


def build_parser(argv: Sequence[str]) -> tuple[argparse.ArgumentParser, dict[str, str]]:
    """The parser, and command -> reason for commands whose module failed to import."""
    parser = argparse.ArgumentParser(prog="cuda-agent", description="Agentic RL for CUDA kernel generation.")
    parser.add_argument("--version", action="version", version=f"cuda-agent {__version__}")
    parser.add_argument("-p", "--plugin", action="append", default=[], metavar="MODULE", help="Extra plugin module (dotted name).")
    parser.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"], help="Log level.")
    parser.add_argument("--log-json", action="store_true", default=None, help="Force JSON logs (default: JSON unless stderr is a TTY).")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    selected = _selected_command(argv)
    unavailable: dict[str, str] = {}
    loaded: set[str] = set()
    for name, module_name in COMMAND_MODULES.items():
        if selected is not None and name != selected:
            continue
        if module_name in loaded:
            continue
        try:
            module = importlib.import_module(module_name)
            module.register_command(subparsers)
            loaded.add(module_name)
        except Exception as exc:  # an absent or broken area must not break the rest
            reason = f"{type(exc).__name__}: {exc}" if not isinstance(exc, ModuleNotFoundError) else f"module {module_name} is not installed ({exc})"
            unavailable[name] = reason
            if name not in subparsers.choices:
                subparsers.add_parser(name, help=f"(not available: {reason})", add_help=False)
    for name in COMMAND_MODULES:
        if name not in subparsers.choices and selected is not None and name != selected:
            subparsers.add_parser(name, add_help=False)
    return parser, unavailable


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``cuda-agent`` script; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser, unavailable = build_parser(argv)
    args, rest = parser.parse_known_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    if args.command in unavailable:
        print(f"error: command {args.command!r} is not available: {unavailable[args.command]}", file=sys.stderr)
        return 2
    if rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    from cuda_agent.logging import configure_logging

    configure_logging(args.log_level, args.log_json)
    func = getattr(args, "func", None)
    if func is None:
        parser.parse_args([args.command, "--help"])
        return 2
    try:
        return int(func(args) or 0)
    except CudaAgentError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
