"""Command ``train``: the configured RL stage chain (:mod:`cuda_agent.training.cli`)."""

from __future__ import annotations

from typing import Any

from cuda_agent.hookspecs import hookimpl


def add_parser(subparsers: Any) -> None:
    """Add the ``train`` parser (imported only when it runs)."""
    from cuda_agent.training.cli import register_command

    register_command(subparsers)


@hookimpl
def register_commands(register) -> None:
    """Register ``train``."""
    register("train", add_parser, description="Train with the configured stages (needs the 'train' extra).")
