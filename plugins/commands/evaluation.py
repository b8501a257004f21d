"""Commands ``eval``, ``report`` and ``ablate`` (:mod:`cuda_agent.harness.evaluation.cli`)."""

from __future__ import annotations

from typing import Any

from cuda_agent.hookspecs import hookimpl


def add_parsers(subparsers: Any) -> None:
    """Add the three parsers (imported only when one of them runs)."""
    from cuda_agent.harness.evaluation.cli import register_command

    register_command(subparsers)


@hookimpl
def register_commands(register) -> None:
    """Register ``eval``, ``report`` and ``ablate``."""
    register("eval", add_parsers, description="Evaluate a policy over tasks (concurrent, resumable).")
    register("report", add_parsers, description="Report one or more eval folders side by side.")
    register("ablate", add_parsers, description="Evaluation-time ablations: one eval per variant, one table.")
