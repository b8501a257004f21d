"""Core CLI commands: run, plugins, config, show, doctor (see :mod:`cuda_agent.cli`).

This package is itself a plugin (registered by the CLI as ``core.commands``): it adds its commands through the
same ``register_commands`` hook as the built-in ``commands.*`` plugins and third-party packages.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

from cuda_agent.hookspecs import hookimpl

#: Core command -> (its module under cuda_agent.commands, one line of help).
CORE_COMMANDS: dict[str, tuple[str, str]] = {
    "run": ("run", "Run one agent episode on a task."),
    "plugins": ("plugins", "List loaded plugins."),
    "config": ("config", "Inspect configuration: the resolved config, validated, with plugin defaults."),
    "show": ("show", "Show a run's trajectory."),
    "doctor": ("doctor", "Report toolchain, GPU and sandbox support."),
}


def _adder(module: str) -> Any:
    def add_parser(subparsers: Any) -> None:
        import_module(f"{__name__}.{module}").register_command(subparsers)

    add_parser.__doc__ = f"Add the parser of cuda_agent.commands.{module}."
    return add_parser


@hookimpl
def register_commands(register) -> None:
    """Register core's own commands."""
    for name, (module, description) in CORE_COMMANDS.items():
        register(name, _adder(module), description=description)
