"""Frozen record interfaces (version :data:`cuda_agent.INTERFACES_VERSION`).

- :mod:`.task`: :class:`TaskManifest`, what a task is.
- :mod:`.result`: :class:`CandidateResult`, what evaluating a candidate found.
- :mod:`.trajectory`: header/turn/end lines of ``trajectory.jsonl`` and its loader.
- :mod:`.messages`: chat messages, tool calls, policy outputs.

Change these only with a version bump and a note in ``docs/interfaces.md``.
"""

from cuda_agent.schemas.messages import Message, PolicyOutput, ToolCall, ToolSchema
from cuda_agent.schemas.result import (
    Baselines,
    CandidateResult,
    CheckError,
    Provenance,
    Status,
    Timing,
)
from cuda_agent.schemas.task import InputDomain, PrecisionContract, TaskManifest, TensorSpec
from cuda_agent.schemas.trajectory import (
    EndRecord,
    HeaderRecord,
    LoadedTrajectory,
    TurnRecord,
    TurnTokens,
    load_trajectory,
)

__all__ = [
    "Baselines",
    "CandidateResult",
    "CheckError",
    "EndRecord",
    "HeaderRecord",
    "InputDomain",
    "LoadedTrajectory",
    "Message",
    "PolicyOutput",
    "PrecisionContract",
    "Provenance",
    "Status",
    "TaskManifest",
    "TensorSpec",
    "Timing",
    "ToolCall",
    "ToolSchema",
    "TurnRecord",
    "TurnTokens",
    "load_trajectory",
]
