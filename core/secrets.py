"""Which configuration values are secrets, and how they stay out of every saved file, log line and hash.

A value is secret by the identity of its field, never because its name contains a word like "token":

- a pydantic field typed ``SecretStr`` (``SecretStr | None`` too), in the command's config model or in any
  registered component's config model (the registry declares them when a component registers);
- a key in :data:`SECRET_KEYS`, the explicit list for plain dict blocks and ``--policy`` spec parameters
  (``openai:MODEL?base_url=...&api_key=sk-...``).

:func:`redact` replaces secret values by :data:`REDACTED` (what config.json, trajectory headers, reports and
``config show`` print); ``redact(..., drop=True)`` removes them (what config hashes and resume comparisons use,
so passing a key by flag or by environment variable changes neither).
"""

from __future__ import annotations

import threading
import typing
from typing import Any
from urllib.parse import unquote

from pydantic import BaseModel, SecretBytes, SecretStr

#: Keys that are secrets wherever they appear as a config key or a spec parameter.
SECRET_KEYS: frozenset[str] = frozenset({"api_key"})
#: What a redacted value reads as.
REDACTED = "***"

_declared: set[str] = set()
_guard = threading.Lock()


def _is_secret_type(annotation: Any) -> bool:
    if annotation in (SecretStr, SecretBytes):
        return True
    return any(_is_secret_type(arg) for arg in typing.get_args(annotation))


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in typing.get_args(annotation) for m in _models_in(arg)]


def secret_fields(model: type[BaseModel], _seen: set[type] | None = None) -> set[str]:
    """Names of the fields typed ``SecretStr`` in ``model`` and the models nested in it."""
    seen = _seen if _seen is not None else set()
    if model in seen:
        return set()
    seen.add(model)
    out: set[str] = set()
    for name, field in model.model_fields.items():
        if _is_secret_type(field.annotation):
            out.add(name)
        for nested in _models_in(field.annotation):
            out |= secret_fields(nested, seen)
    return out


def declare_secret_fields(model: type[BaseModel]) -> None:
    """Treat the ``SecretStr`` fields of ``model`` as secret keys from now on (the registry calls this)."""
    names = secret_fields(model)
    if names:
        with _guard:
            _declared.update(names)


def secret_keys() -> frozenset[str]:
    """The explicit list plus every ``SecretStr`` field declared so far."""
    with _guard:
        return SECRET_KEYS | frozenset(_declared)


def is_secret(key: Any) -> bool:
    """``key`` names a secret (exact match)."""
    return isinstance(key, str) and key in secret_keys()


def redact_spec(text: str, *, drop: bool = False) -> str:
    """A ``NAME:TARGET?k=v&...`` spec with the values of secret parameters hidden (``drop``: removed)."""
    head, sep, query = text.partition("?")
    if not sep or not query:
        return text
    keys = secret_keys()
    parts, changed = [], False
    for part in query.split("&"):
        key, eq, _ = part.partition("=")
        if eq and unquote(key) in keys:
            changed = True
            if not drop:
                parts.append(f"{key}={REDACTED}")
            continue
        parts.append(part)
    if not changed:
        return text
    return head + ("?" + "&".join(parts) if parts else "")


def redact(data: Any, *, drop: bool = False) -> Any:
    """A copy of ``data`` (dicts, lists, strings) with secret values hidden, or removed with ``drop``."""
    keys = secret_keys()
    if isinstance(data, dict):
        out = {}
        for k, v in data.items():
            if k in keys:
                if not drop:
                    out[k] = v if v in (None, "") else REDACTED
                continue
            value = redact(v, drop=drop)
            if drop and isinstance(v, dict) and v and all(key in keys for key in v):
                continue  # a block that held only secrets goes with them
            out[k] = value
        return out
    if isinstance(data, (list, tuple)):
        return [redact(v, drop=drop) for v in data]
    if isinstance(data, str) and "?" in data and "=" in data:
        return redact_spec(data, drop=drop)
    return data


def has_redacted(data: Any) -> list[str]:
    """Dotted places where ``data`` (a saved config) holds a redacted secret; empty when none."""
    found: list[str] = []

    def walk(value: Any, where: str) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                walk(v, f"{where}.{k}" if where else str(k))
        elif isinstance(value, list):
            for i, v in enumerate(value):
                walk(v, f"{where}.{i}")
        elif value == REDACTED or (isinstance(value, str) and f"={REDACTED}" in value):
            found.append(where)

    walk(data, "")
    return found
