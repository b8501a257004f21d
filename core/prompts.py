"""Prompt rendering: jinja2 with ``StrictUndefined`` (a missing variable fails loudly).

Built-in templates live in ``cuda_agent/templates/*.j2``; a run may replace
the system template with ``agent.system_prompt_template`` (a file path).
Variables: ``skill`` (text or ""), ``tools`` (list of ToolSchema),
``protocol`` ('text' | 'native'), ``mode``, ``task`` (TaskManifest),
``kernel_suffix``.
"""

from __future__ import annotations

import functools
from importlib import resources
from pathlib import Path
from typing import Any

import jinja2

from cuda_agent.errors import ConfigError

_ENV = jinja2.Environment(undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)


def compact_schema(schema: Any, top: bool = True) -> Any:
    """A JSON schema without pydantic's ``title`` keys (and the model docstring at top): fewer prompt tokens."""
    if isinstance(schema, dict):
        drop = {"title"} | ({"description"} if top else set())
        return {k: compact_schema(v, False) for k, v in schema.items()
                if k not in drop or (k == "title" and not isinstance(v, str))}
    if isinstance(schema, list):
        return [compact_schema(v, False) for v in schema]
    return schema


_ENV.filters["compact_schema"] = compact_schema


def builtin_template(name: str) -> str:
    """Source of a built-in template (``system.j2``, ``task.j2``)."""
    return resources.files("cuda_agent").joinpath("templates", name).read_text(encoding="utf-8")


@functools.lru_cache(maxsize=64)
def _compiled(source: str) -> jinja2.Template:
    """The compiled template of ``source`` (compiling costs ~20 ms; episodes render the same few templates)."""
    return _ENV.from_string(source)


def render(source: str, origin: str, **variables: Any) -> str:
    """Render template ``source``; errors name ``origin`` and the missing/invalid part."""
    try:
        return _compiled(source).render(**variables).strip() + "\n"
    except jinja2.UndefinedError as exc:
        raise ConfigError(f"template {origin}: {exc.message}; available variables: {', '.join(sorted(variables))}") from exc
    except jinja2.TemplateSyntaxError as exc:
        raise ConfigError(f"template {origin}, line {exc.lineno}: {exc.message}") from exc


def render_system_prompt(template_path: str | None, **variables: Any) -> str:
    """The system prompt, from ``template_path`` or the built-in ``system.j2``."""
    if template_path is None:
        return render(builtin_template("system.j2"), "system.j2 (built-in)", **variables)
    path = Path(template_path)
    if not path.is_file():
        raise ConfigError(f"agent.system_prompt_template: file {path} does not exist")
    return render(path.read_text(encoding="utf-8"), str(path), **variables)


def render_task_prompt(**variables: Any) -> str:
    """The first user message (task, reference code, instructions)."""
    return render(builtin_template("task.j2"), "task.j2 (built-in)", **variables)
