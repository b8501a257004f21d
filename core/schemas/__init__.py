"""Frozen record interfaces (version :data:`cuda_agent.INTERFACES_VERSION`).

- :mod:`.task`: :class:`TaskManifest`, what a task is.
- :mod:`.result`: :class:`CandidateResult`, what evaluating a candidate found, and its
  :class:`Diagnostics` (how the evaluation went: :class:`BuildInfo`, :class:`MemoryInfo`,
  :class:`WidenedInfo`, :class:`FreshSetsInfo`, ...).
- :mod:`.trajectory`: header/turn/end lines of ``trajectory.jsonl`` and its loader.
- :mod:`.messages`: chat messages, tool calls, policy outputs.

Change these only with a version bump and a note in ``docs/interfaces.md``.
"""

from cuda_agent.schemas.messages import Message, PolicyOutput, ToolCall, ToolSchema
from cuda_agent.schemas.result import (
    Baselines,
    BuildInfo,
    CandidateResult,
    CheckError,
    Diagnostics,
    FreshSetsInfo,
    InputSetsInfo,
    MemoryInfo,
    Provenance,
    SanitizerInfo,
    SpinCalibration,
    StartPhase,
    Status,
    Timing,
    WidenedInfo,
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
    "BuildInfo",
    "CandidateResult",
    "CheckError",
    "Diagnostics",
    "EndRecord",
    "FreshSetsInfo",
    "HeaderRecord",
    "InputDomain",
    "InputSetsInfo",
    "LoadedTrajectory",
    "MemoryInfo",
    "Message",
    "PolicyOutput",
    "PrecisionContract",
    "Provenance",
    "SanitizerInfo",
    "SpinCalibration",
    "StartPhase",
    "Status",
    "TaskManifest",
    "TensorSpec",
    "Timing",
    "ToolCall",
    "ToolSchema",
    "TurnRecord",
    "TurnTokens",
    "WidenedInfo",
    "load_trajectory",
]
