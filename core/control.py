"""Control flow of the agent loop, by exceptions (mini-swe-agent style).

Each exception carries the text the model sees (or the reason the episode
ends), so the loop has one place that turns them into observations.
"""

from __future__ import annotations


class AgentControl(Exception):
    """Base of the loop's control-flow exceptions."""

    def __init__(self, message: str = "") -> None:
        super().__init__(message)
        self.message = message


class FormatError(AgentControl):
    """The model's output could not be parsed into tool calls; the message is its observation."""


class LimitsExceeded(AgentControl):
    """A turn, token or wall-clock limit was reached; ``exit`` names which."""

    def __init__(self, exit: str, message: str = "") -> None:
        super().__init__(message or f"limit reached: {exit}")
        self.exit = exit


class Submitted(AgentControl):
    """The ``finish`` tool was called: the episode ends after this turn."""


class PolicyExhausted(AgentControl):
    """A scripted or replayed policy has no actions left: the episode ends."""
