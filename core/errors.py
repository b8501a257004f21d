"""Exceptions shared across cuda-agent. Each message says what was wrong and what is valid."""

from __future__ import annotations

from collections.abc import Iterable


class CudaAgentError(Exception):
    """Base class of every error cuda-agent raises on purpose."""


class PluginError(CudaAgentError):
    """A plugin failed to load, registered a duplicate name, or broke a hook contract."""


class ConfigError(CudaAgentError):
    """The configuration is invalid (unknown key, unknown name, bad value)."""


class SpecError(CudaAgentError):
    """A ``--policy`` / ``--tasks`` spec string could not be parsed."""


def plural(kind: str) -> str:
    """``policy`` -> ``policies``, ``data_source`` -> ``data sources``, ``tool`` -> ``tools``."""
    words = kind.replace("_", " ")
    return words[:-1] + "ies" if words.endswith("y") else words + "s"


class UnknownNameError(ConfigError):
    """A component name is not registered."""

    def __init__(self, kind: str, name: str, valid: Iterable[str], where: str = "") -> None:
        valid_sorted = sorted(valid)
        where_txt = f" (at {where})" if where else ""
        super().__init__(
            f"unknown {kind.replace('_', ' ')} {name!r}{where_txt}; valid {plural(kind)}: "
            + (", ".join(valid_sorted) if valid_sorted else "(none registered)")
        )
        self.kind, self.name, self.valid = kind, name, valid_sorted


class WorkspaceError(CudaAgentError):
    """A workspace operation was refused (path escape, protected file, missing file)."""


class TrajectoryError(CudaAgentError):
    """A trajectory file is unreadable beyond its cut tail."""


class TokenizationContractError(CudaAgentError):
    """The chat template broke the prefix property of the tokenization contract."""
