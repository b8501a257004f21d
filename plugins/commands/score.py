"""Command ``score``: grade existing solutions (:mod:`cuda_agent.harness.score_cli`)."""

from __future__ import annotations

from typing import Any

from cuda_agent.hookspecs import hookimpl


def add_parser(subparsers: Any) -> None:
    """Add the ``score`` parser (imported only when it runs)."""
    from cuda_agent.harness.score_cli import register_command

    register_command(subparsers)


@hookimpl
def register_commands(register) -> None:
    """Register ``score``."""
    register("score", add_parser, description="Grade existing solutions with the trusted grading pass.")
