"""The ``cuda-agent`` command line.

Every command enters through the ``register_commands`` hook: core's own (``run``, ``plugins``, ``config``,
``show``, ``doctor``) from :mod:`cuda_agent.commands`, the others (``eval``, ``report``, ``ablate``,
``score``, ``data``, ``train``) from the built-in plugins ``commands.*``, and third-party commands from entry
points. ``register(name, add_parser, description=...)``: only the ``add_parser`` of the command being run is
called, so only its modules are imported; a broken or absent area cannot break the others and yields "command X
is not available: <reason>". A missing optional package names the extra to install, in one line.

Global options (before the command): ``-p MODULE`` loads an extra plugin module by dotted name (repeatable; for
local plugins without an entry point), ``--log-level``, ``--log-json``.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import threading
from collections.abc import Sequence
from typing import Any

from cuda_agent import __version__
from cuda_agent.errors import CudaAgentError, PluginError
from cuda_agent.extras import missing_package_message

#: Exit status of a command stopped by Ctrl-C (128 + SIGINT), as shells report it.
INTERRUPTED = 130


def add_config_options(parser: argparse.ArgumentParser) -> None:
    """The ``-c FILE`` / ``-o key=value`` options every command takes."""
    parser.add_argument("-c", "--config", action="append", default=[], metavar="FILE", help="YAML config file (repeatable, merged in order).")
    parser.add_argument("-o", "--override", action="append", default=[], metavar="KEY=VALUE",
                        help="Dotted override, e.g. agent.max_turns=50 or stages.0.config.tasks=[a.jsonl] (repeatable).")


def _plugin_modules(dotted_names: Sequence[str]) -> list[tuple[str, object]]:
    out = []
    for dotted in dotted_names:
        try:
            out.append((dotted, importlib.import_module(dotted)))
        except ImportError as exc:
            raise CudaAgentError(f"-p {dotted}: cannot import plugin module: {exc}") from exc
    return out


def make_plugin_manager(args: argparse.Namespace, config: Any, extra_plugins: Sequence[tuple[str, object]] = ()) -> Any:
    """A fresh plugin manager for ``config``, with ``-p`` extra plugin modules and ``extra_plugins``."""
    from cuda_agent.plugin_manager import PluginManager

    extra = [*extra_plugins, *_plugin_modules(getattr(args, "plugin", None) or [])]
    return PluginManager(disable=getattr(config, "disable", ()), extra_plugins=extra)


def _global_options(argv: Sequence[str]) -> tuple[str | None, list[str]]:
    """The command name (first positional argument) and the ``-p`` modules given before it."""
    plugins: list[str] = []
    it = iter(argv)
    for token in it:
        if token in ("-p", "--plugin"):
            value = next(it, None)
            if value is not None:
                plugins.append(value)
            continue
        if token.startswith("--plugin="):
            plugins.append(token.partition("=")[2])
            continue
        if token == "--log-level":
            next(it, None)
            continue
        if not token.startswith("-"):
            return token, plugins
    return None, plugins


def command_entries(plugin_modules: Sequence[str] = ()) -> dict[str, Any]:
    """Command name -> registry entry, from core, the ``commands.*`` built-ins, entry points and ``-p`` modules.

    A third-party plugin that fails to load is left out here (its error is reported when a run loads plugins).
    """
    from cuda_agent import commands as core_commands
    from cuda_agent.plugin_manager import PluginManager

    extra = [("core.commands", core_commands), *_plugin_modules(plugin_modules)]
    try:
        pm = PluginManager(builtin_folders=("commands",), extra_plugins=extra)
    except PluginError:
        pm = PluginManager(builtin_folders=("commands",), extra_plugins=extra, load_entrypoints=False)
    entries = sorted(pm.registry.entries("command"), key=lambda e: (e.plugin != "core.commands", e.name))
    return {e.name: e for e in entries}


def build_parser(argv: Sequence[str]) -> tuple[argparse.ArgumentParser, dict[str, str]]:
    """The parser, and command -> reason for commands whose parser could not be added."""
    parser = argparse.ArgumentParser(prog="cuda-agent", description="Agentic RL for CUDA kernel generation.")
    parser.add_argument("--version", action="version", version=f"cuda-agent {__version__}")
    parser.add_argument("-p", "--plugin", action="append", default=[], metavar="MODULE", help="Extra plugin module (dotted name).")
    parser.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"], help="Log level.")
    parser.add_argument("--log-json", action="store_true", default=None, help="Force JSON logs (default: JSON unless stderr is a TTY).")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    selected, plugin_modules = _global_options(argv)
    unavailable: dict[str, str] = {}
    entries = command_entries(plugin_modules)
    if selected in entries:
        entry = entries[selected]
        try:
            entry.factory(subparsers)
        except Exception as exc:  # an absent or broken area must not break the rest
            reason = missing_package_message(exc) if isinstance(exc, ModuleNotFoundError) else f"{type(exc).__name__}: {exc}"
            unavailable[selected] = f"{reason} (plugin {entry.plugin!r})"
    for name, entry in entries.items():
        if name not in subparsers.choices:
            label = f"(not available: {unavailable[name]})" if name in unavailable else entry.description
            subparsers.add_parser(name, help=label, add_help=False)
    return parser, unavailable


def _exit_now_if_threads_linger(status: int) -> int:
    """After an interrupt, worker threads stuck in a network call must not hold the exit: leave at once."""
    lingering = [t for t in threading.enumerate() if t is not threading.main_thread() and not t.daemon and t.is_alive()]
    if lingering:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)
    return status


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``cuda-agent`` script; returns the exit status."""
    as_script = argv is None
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        parser, unavailable = build_parser(argv)
    except CudaAgentError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
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
    from contextlib import nullcontext

    from cuda_agent.interrupts import InterruptExit

    guard = InterruptExit(f"cuda-agent {args.command}") if as_script else nullcontext()
    try:
        with guard:
            status = int(func(args) or 0)
    except CudaAgentError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except ModuleNotFoundError as exc:
        print(f"error: cuda-agent {args.command}: {missing_package_message(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"interrupted: cuda-agent {args.command} stopped", file=sys.stderr)
        status = INTERRUPTED
    if status == INTERRUPTED and as_script:
        return _exit_now_if_threads_linger(status)
    return status


if __name__ == "__main__":
    raise SystemExit(main())
