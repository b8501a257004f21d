"""Configuration: pydantic models, YAML files, dotted ``-o key=value`` overrides.

Every command owns a config model (``RunConfig`` here; eval, data and train
commands extend it in their own modules). :func:`load_config` merges YAML
files in order, applies overrides, validates, and turns pydantic's errors
into messages that list the valid keys. ``plugins.<name>`` blocks are
validated by the named component's own config model when it is built.
"""

from __future__ import annotations

import difflib
import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from cuda_agent.errors import ConfigError
from cuda_agent.secrets import declare_secret_fields, redact

M = TypeVar("M", bound=BaseModel)


class StrictModel(BaseModel):
    """Base for config blocks: unknown keys are errors, fields documented."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class PluginConfig(StrictModel):
    """Base class of a plugin component's config block (``plugins.<name>``): subclass it.

    Unknown keys are errors that list the valid ones, and assignments are validated. Give every field a
    ``Field(description=...)``; type secrets (API keys, passwords) as ``pydantic.SecretStr`` so they are
    never saved, printed or hashed.
    """


class AgentConfig(StrictModel):
    """The agent loop's limits and protocol."""

    mode: Literal["agent", "single_turn"] = Field(
        "agent", description="'agent': ReAct loop with tools; 'single_turn': one response holds the whole solution."
    )
    max_turns: int = Field(50, ge=1, description="Turns at most (paper: 150 in training, 200 at evaluation).")
    max_tokens: int | None = Field(None, ge=1, description="Total generated tokens at most; None = no limit.")
    wall_clock_s: float | None = Field(None, gt=0, description="Episode wall-clock limit in seconds; None = none.")
    tool_protocol: Literal["native", "text"] = Field(
        "text", description="'native': OpenAI function calls; 'text': <tool_call>{json}</tool_call> blocks."
    )
    observation_limit: int = Field(8000, ge=200, description="Observation characters shown at most (truncated with a marker).")
    selection: Literal["final", "best", "first_passing"] = Field(
        "final", description="Which workspace state the trusted grading pass scores."
    )
    system_prompt_template: str | None = Field(
        None, description="Path of a jinja2 template for the system prompt; None = built-in (skill + task)."
    )
    use_skill: bool = Field(True, description="Inject the backend's SKILL document into the system prompt.")


class RunConfig(StrictModel):
    """Configuration of ``cuda-agent run`` (and the base of eval/train configs)."""

    policy: str = Field("scripted", description="Policy spec: NAME[:TARGET][?k=v&...] (see cuda_agent.specs).")
    backend: str = Field("cpu", description="Backend name: 'cpu', 'cuda', or a third-party one.")
    reward: str = Field("milestone", description="Reward plugin name.")
    tools: list[str] | None = Field(
        None, description="Tools offered to the model, in order; None = every built-in tool plus extra_tools."
    )
    extra_tools: list[str] = Field(
        default_factory=list,
        description="Third-party tools offered besides the built-ins (when tools is None). Installed tool plugins are "
        "opt-in, so installing a package never changes a run's prompt silently.",
    )
    disable: list[str] = Field(
        default_factory=list,
        description="Plugins ('tools.profile') or components ('profile', 'tool:profile') to leave out (ablations).",
    )
    seed: int = Field(0, description="Run seed (sampling, scripted choices); grading seeds are drawn separately.")
    agent: AgentConfig = Field(default_factory=AgentConfig, description="Agent loop settings.")
    plugins: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="Per-component config blocks keyed by component name."
    )


def _list_index(items: list[Any], key: str, dotted: str, where: str) -> int:
    """The list index ``key`` names, or an error saying what the list at ``where`` holds."""
    try:
        index = int(key)
    except ValueError:
        raise ConfigError(f"override {dotted!r}: {where or '(root)'} is a list; address an item by its index "
                          f"(0..{len(items) - 1}), not {key!r}") from None
    if not -len(items) <= index < len(items):
        raise ConfigError(f"override {dotted!r}: {where} has {len(items)} item(s); index {index} is out of range")
    return index


def _set_dotted(data: dict[str, Any], dotted: str, value: Any) -> None:
    """Set ``a.b.0.c`` in nested dicts and lists (an integer key indexes a list that exists already)."""
    keys = dotted.split(".")
    cur: Any = data
    for depth, k in enumerate(keys[:-1]):
        where = ".".join(keys[: depth + 1])
        if isinstance(cur, list):
            nxt = cur[_list_index(cur, k, dotted, ".".join(keys[:depth]))]
        else:
            nxt = cur.get(k)
            if nxt is None:
                nxt = cur[k] = {}
        if not isinstance(nxt, (dict, list)):
            raise ConfigError(f"override {dotted!r}: {where!r} is a value ({nxt!r}), not a block or a list")
        cur = nxt
    if isinstance(cur, list):
        cur[_list_index(cur, keys[-1], dotted, ".".join(keys[:-1]))] = value
    else:
        cur[keys[-1]] = value


def parse_override(text: str) -> tuple[str, Any]:
    """``agent.max_turns=50`` -> ('agent.max_turns', 50); values are YAML."""
    key, eq, raw = text.partition("=")
    if not eq or not key.strip():
        raise ConfigError(f"override {text!r} is not key=value (e.g. -o agent.max_turns=50)")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError as exc:
        raise ConfigError(f"override {text!r}: value is not valid YAML: {exc}") from exc
    return key.strip(), value


def deep_merge(base: dict[str, Any], top: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in top.items():
        out[k] = deep_merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def read_yaml(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"config file {path} does not exist")
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"config file {path} is not valid YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path} must hold a mapping at top level, got {type(data).__name__}")
    return data


def _model_at(model: type[BaseModel], loc: Sequence[Any]) -> type[BaseModel] | None:
    cur: Any = model
    for part in loc[:-1]:
        if not (isinstance(cur, type) and issubclass(cur, BaseModel)) or part not in cur.model_fields:
            return None
        ann = cur.model_fields[part].annotation
        cur = ann
    return cur if isinstance(cur, type) and issubclass(cur, BaseModel) else None


def format_validation_error(model: type[BaseModel], exc: ValidationError, source: str = "") -> str:
    """pydantic errors rephrased: where, what, and the valid keys or values."""
    lines = [f"invalid configuration{' in ' + source if source else ''}:"]
    for err in exc.errors():
        loc = [p for p in err["loc"]]
        dotted = ".".join(str(p) for p in loc) or "(root)"
        if err["type"] == "extra_forbidden":
            parent = _model_at(model, loc)
            valid = ", ".join(parent.model_fields) if parent else "?"
            close = difflib.get_close_matches(str(loc[-1]), parent.model_fields if parent else [], n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            lines.append(f"  {dotted}: unknown key{hint}; valid keys here: {valid}")
        else:
            ctx = err.get("ctx") or {}
            expected = f" (expected {ctx['expected']})" if "expected" in ctx else ""
            lines.append(f"  {dotted}: {err['msg']}{expected}; got {err.get('input')!r}")
    return "\n".join(lines)


def load_config(
    model: type[M],
    files: Sequence[str | Path] = (),
    overrides: Sequence[str] = (),
    base: dict[str, Any] | None = None,
) -> M:
    """Merge ``base``, YAML ``files`` in order, then ``-o`` ``overrides``; validate."""
    data: dict[str, Any] = dict(base or {})
    for f in files:
        data = deep_merge(data, read_yaml(f))
    for o in overrides:
        key, value = parse_override(o)
        _set_dotted(data, key, value)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(format_validation_error(model, exc, ", ".join(map(str, files)))) from exc


def resolved(config: BaseModel) -> dict[str, Any]:
    """The config as saved with a run: JSON-mode dump, secrets redacted (see :mod:`cuda_agent.secrets`)."""
    declare_secret_fields(type(config))
    return redact(config.model_dump(mode="json"))


def without_secrets(config: BaseModel | dict[str, Any]) -> dict[str, Any]:
    """The config with every secret removed (not masked): what hashes and resume comparisons see."""
    if isinstance(config, BaseModel):
        declare_secret_fields(type(config))
        config = config.model_dump(mode="json")
    return redact(config, drop=True)


def config_hash(config: BaseModel | dict[str, Any]) -> str:
    """``sha256:<16 hex>`` of the resolved config without its secrets (the same with or without an API key)."""
    blob = json.dumps(without_secrets(config), sort_keys=True).encode()
    return "sha256:" + hashlib.sha256(blob).hexdigest()[:16]


def config_diff(saved: dict[str, Any], current: dict[str, Any], prefix: str = "") -> list[str]:
    """Human-readable differences between two resolved configs (for resume refusals)."""
    out: list[str] = []
    for key in sorted(set(saved) | set(current)):
        a, b = saved.get(key, "<absent>"), current.get(key, "<absent>")
        dotted = f"{prefix}{key}"
        if isinstance(a, dict) and isinstance(b, dict):
            out += config_diff(a, b, dotted + ".")
        elif a != b:
            out.append(f"{dotted}: saved {a!r} != now {b!r}")
    return out
