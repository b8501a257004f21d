"""The ``--policy`` / ``--tasks`` spec grammar.

    SPEC   := NAME [":" TARGET] ["?" PARAMS]
    PARAMS := KEY "=" VALUE ("&" KEY "=" VALUE)*

``NAME`` is a registered policy or data-source name; ``TARGET`` (everything
after the first ':' up to '?') is a path, model name or URL; values are
parsed as YAML scalars (``3`` -> int, ``true`` -> bool, ``a,b`` stays a
string). Examples::

    scripted:examples/trajectories/relu_cpu.yaml
    openai:gpt-4o?base_url=http://127.0.0.1:8000/v1&temperature=0.2
    hf:/models/tiny?max_new_tokens=256
    kernelbench:/data/KernelBench?levels=1,2&ids=1-10
    folder:examples/tasks

A bare path for ``--tasks`` (no registered name before ':') is inferred:
a folder -> ``folder``, ``*.jsonl`` -> ``jsonl``, ``*.parquet`` -> ``parquet``,
``*.py`` -> ``file``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import yaml

from cuda_agent.errors import SpecError
from cuda_agent.secrets import redact_spec


@dataclass(frozen=True)
class Spec:
    """A parsed spec."""

    name: str
    target: str | None = None
    params: dict[str, Any] = field(default_factory=dict)

    def config(self, target_field: str = "target") -> dict[str, Any]:
        """The config dict for the component: params plus target under ``target_field``."""
        out = dict(self.params)
        if self.target is not None:
            out[target_field] = self.target
        return out

    def __str__(self) -> str:
        """The spec as text, secret parameters (``api_key=...``) shown as ``***``: safe to save, log and print."""
        return redact_spec(self.unredacted())

    def __repr__(self) -> str:
        return f"Spec({str(self)!r})"

    def unredacted(self) -> str:
        """The spec as text with its secrets: only for handing to the component, never for output."""
        s = self.name + (f":{self.target}" if self.target is not None else "")
        if self.params:
            s += "?" + "&".join(f"{k}={v}" for k, v in self.params.items())
        return s


def _scalar(text: str) -> Any:
    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError:
        return text
    return value if isinstance(value, (int, float, bool, str)) or value is None else text


def parse_spec(spec: str, *, known_names: set[str] | None = None, kind: str = "spec") -> Spec:
    """Parse ``spec``; with ``known_names`` an unknown name is an error listing them."""
    if not spec or not spec.strip():
        raise SpecError(f"empty {kind} spec; expected NAME[:TARGET][?key=value&...]")
    shown = redact_spec(spec)  # error messages never carry a secret parameter
    head, _, query = spec.partition("?")
    name, sep, target = head.partition(":")
    name = name.strip()
    if not name:
        raise SpecError(f"{kind} spec {shown!r} has no name before ':'")
    params: dict[str, Any] = {}
    if query:
        for part in query.split("&"):
            if not part:
                continue
            key, eq, value = part.partition("=")
            if not eq or not key:
                raise SpecError(f"{kind} spec {shown!r}: parameter {redact_spec('?' + part)[1:]!r} is not key=value")
            if key in params:
                raise SpecError(f"{kind} spec {shown!r}: parameter {key!r} given twice")
            params[key] = _scalar(unquote(value))
    if known_names is not None and name not in known_names:
        raise SpecError(
            f"unknown {kind} {name!r} in {shown!r}; valid: {', '.join(sorted(known_names)) or '(none)'}"
        )
    return Spec(name=name, target=target if sep else None, params=params)


_SUFFIX_SOURCES = {".jsonl": "jsonl", ".parquet": "parquet", ".py": "file"}


def parse_tasks_spec(spec: str, known_names: set[str]) -> Spec:
    """Parse ``--tasks``; a bare path is mapped to a source by its kind."""
    head = spec.partition("?")[0]
    name = head.partition(":")[0]
    if name in known_names:
        return parse_spec(spec, known_names=known_names, kind="task source")
    path_text, _, query = spec.partition("?")
    path = Path(path_text)
    inferred = "folder" if path.is_dir() else _SUFFIX_SOURCES.get(path.suffix)
    if inferred is None:
        raise SpecError(
            f"cannot infer a task source for {redact_spec(spec)!r}: not a registered source name "
            f"({', '.join(sorted(known_names))}) and not a folder, .jsonl, .parquet or .py path"
        )
    return parse_spec(f"{inferred}:{path_text}" + (f"?{query}" if query else ""), kind="task source")
