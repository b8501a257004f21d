"""What every result carries about the run that produced it: config hash, enabled plugins, system prompt hash.

:class:`RunStamp` is computed once per episode from its trajectory header (so the eval runner's regrades get the
same stamp as the loop's own results) and merged into ``CandidateResult.provenance`` of every result.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cuda_agent.config import config_hash
from cuda_agent.schemas.result import CandidateResult
from cuda_agent.schemas.trajectory import HeaderRecord


def plugin_versions(plugins: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """Plugin name -> 'distribution version', from ``PluginInfo.as_dict()`` rows (plugins.json, the header)."""
    return {str(p["name"]): f"{p.get('distribution', '?')} {p.get('version', '?')}" for p in plugins}


def system_prompt_hash(system_prompt: str, tools: Sequence[Mapping[str, Any]]) -> str:
    """``sha256:<16 hex>`` of the rendered system prompt and the tool schemas offered with it."""
    blob = json.dumps({"system_prompt": system_prompt, "tools": list(tools)}, sort_keys=True).encode()
    return "sha256:" + hashlib.sha256(blob).hexdigest()[:16]


@dataclass(frozen=True)
class RunStamp:
    """The run-level provenance stamped on each result of an episode (or of a ``score`` run)."""

    config_hash: str | None = None
    plugins: dict[str, str] = field(default_factory=dict)
    system_prompt_hash: str | None = None

    def apply(self, result: CandidateResult) -> CandidateResult:
        """``result`` with these fields set in its provenance (fields the result already has are kept)."""
        prov = result.provenance
        update = {
            "config_hash": prov.config_hash or self.config_hash,
            "plugins": prov.plugins or dict(self.plugins),
            "system_prompt_hash": prov.system_prompt_hash or self.system_prompt_hash,
        }
        return result.model_copy(update={"provenance": prov.model_copy(update=update)})

    def as_dict(self) -> dict[str, Any]:
        """For reports."""
        return {"config_hash": self.config_hash, "plugins": dict(self.plugins),
                "system_prompt_hash": self.system_prompt_hash}


def stamp_from_header(header: HeaderRecord) -> RunStamp:
    """The stamp of an episode, from its trajectory header (its config there is already redacted)."""
    return RunStamp(
        config_hash=config_hash(header.config),
        plugins=plugin_versions(header.plugins),
        system_prompt_hash=system_prompt_hash(header.system_prompt, header.tools),
    )


def run_stamp(config: Any, plugin_manager: Any, system_prompt: str | None = None,
              tools: Sequence[Mapping[str, Any]] = ()) -> RunStamp:
    """The stamp of a run with no trajectory (``score``): config hash, enabled plugins, the prompt if there is one."""
    return RunStamp(
        config_hash=config_hash(config),
        plugins=plugin_versions(p.as_dict() for p in plugin_manager.plugins()),
        system_prompt_hash=system_prompt_hash(system_prompt, tools) if system_prompt is not None else None,
    )
