"""Command ``data``: task synthesis (:mod:`cuda_agent.training.synthesis.cli`)."""

from __future__ import annotations

from typing import Any

from cuda_agent.hookspecs import hookimpl


def add_parser(subparsers: Any) -> None:
    """Add the ``data`` parser and its subcommands (imported only when it runs)."""
    from cuda_agent.training.synthesis.cli import register_command

    register_command(subparsers)


@hookimpl
def register_commands(register) -> None:
    """Register ``data``."""
    register("data", add_parser, description="Synthesize training tasks: mine, compose, filter, dedup, build.")
