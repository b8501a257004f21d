"""The component registry: names to factories, per kind, with provenance.

Registration hooks hand plugins a :class:`RegisterCallback` bound to one kind
and one plugin, so every entry knows who registered it and a duplicate name
is an error naming both plugins.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from pydantic import BaseModel, ValidationError

from cuda_agent.errors import ConfigError, PluginError, UnknownNameError
from cuda_agent.secrets import declare_secret_fields

#: The kinds of component, each fed by the hook ``register_<kind>s``
#: (``data_source`` by ``register_data_sources``, ``task_filter`` by
#: ``register_task_filters``, ``policy`` by ``register_policies``).
KINDS: tuple[str, ...] = (
    "tool",
    "reward",
    "backend",
    "policy",
    "data_source",
    "task_filter",
    "stage",
    "logger",
    "skill",
    "command",
)

HOOK_FOR_KIND: dict[str, str] = {
    kind: "register_policies" if kind == "policy" else f"register_{kind}s" for kind in KINDS
}


class RegisterCallback(Protocol):
    def __call__(
        self,
        name: str,
        factory: Callable[..., Any],
        *,
        config_model: type[BaseModel] | None = None,
        description: str | None = None,
        backend: str | None = None,
    ) -> None: ...


@dataclass(frozen=True)
class Entry:
    """One registered component."""

    kind: str
    name: str
    factory: Callable[..., Any]
    plugin: str
    config_model: type[BaseModel] | None = None
    description: str = ""
    #: For a skill: the backend it belongs to (``register(..., backend="triton")``); None for other kinds, and for
    #: a skill any backend may name.
    backend: str | None = None

    def build(self, config: dict[str, Any] | BaseModel | None = None) -> Any:
        """Instantiate the component, validating ``config`` with its model.

        A component without a config model refuses a non-empty config block.
        """
        if self.config_model is None:
            if config:
                raise ConfigError(
                    f"{self.kind} {self.name!r} (plugin {self.plugin!r}) takes no configuration, "
                    f"but got keys: {', '.join(sorted(dict(config)))}"
                )
            return self.factory()
        return self.factory(self.validate_config(config))

    def validate_config(self, config: dict[str, Any] | BaseModel | None) -> BaseModel:
        assert self.config_model is not None
        if isinstance(config, self.config_model):
            return config
        data = config.model_dump() if isinstance(config, BaseModel) else dict(config or {})
        unknown = unknown_keys(self.config_model, data)
        if unknown:
            raise ConfigError(
                f"invalid config for {self.kind} {self.name!r} (block plugins.{self.name}): unknown key(s) "
                f"{', '.join(repr(k) for k in unknown)}; valid keys: {', '.join(self.config_model.model_fields)}"
            )
        try:
            return self.config_model.model_validate(data)
        except ValidationError as exc:
            valid = ", ".join(self.config_model.model_fields)
            raise ConfigError(
                f"invalid config for {self.kind} {self.name!r} (block plugins.{self.name}): "
                f"{_format_validation_error(exc)}; valid keys: {valid}"
            ) from exc


def unknown_keys(model: type[BaseModel], data: dict[str, Any]) -> list[str]:
    """Keys of ``data`` that ``model`` has no field for, unless the model sets ``extra`` itself.

    pydantic ignores unknown keys by default; a plugin's block is stricter: a typo must not pass silently.
    A model that states ``extra="allow"`` or ``extra="ignore"`` in its ``model_config`` keeps that choice.
    """
    if model.model_config.get("extra") is not None:
        return []
    names = set(model.model_fields)
    names |= {f.alias for f in model.model_fields.values() if f.alias}
    return sorted(str(k) for k in data if k not in names)


def _format_validation_error(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"]) or "(root)"
        parts.append(f"{loc}: {err['msg']}")
    return "; ".join(parts)


@dataclass
class Registry:
    """All registered components of one plugin manager, by kind and name.

    ``disabled`` holds component names (``"profile"``) or qualified names
    (``"tool:profile"``) refused at registration time, for ablations.
    """

    disabled: set[str] = field(default_factory=set)
    #: Plugin names the config disabled (blocked before import): named when a selected component is missing.
    blocked_plugins: set[str] = field(default_factory=set)
    _entries: dict[str, dict[str, Entry]] = field(default_factory=lambda: {k: {} for k in KINDS})
    _skipped: list[tuple[str, str, str]] = field(default_factory=list)

    def callback(self, kind: str, plugin: str) -> RegisterCallback:
        """A ``register`` function bound to ``kind`` and the registering ``plugin``."""
        if kind not in KINDS:
            raise PluginError(f"unknown component kind {kind!r}; valid: {', '.join(KINDS)}")

        def register(
            name: str,
            factory: Callable[..., Any],
            *,
            config_model: type[BaseModel] | None = None,
            description: str | None = None,
            backend: str | None = None,
        ) -> None:
            if backend is not None and kind != "skill":
                raise PluginError(f"plugin {plugin!r} registers {kind} {name!r} with backend={backend!r}; only skills "
                                  "(register_skills) name the backend they belong to")
            self.add(
                Entry(
                    kind=kind,
                    name=name,
                    factory=factory,
                    plugin=plugin,
                    config_model=config_model,
                    description=description or _first_doc_line(factory),
                    backend=backend,
                )
            )

        return register  # type: ignore[return-value]

    def add(self, entry: Entry) -> None:
        if not isinstance(entry.name, str) or not entry.name or not entry.name.replace("_", "a").replace("-", "a").replace(".", "a").isalnum():
            raise PluginError(
                f"plugin {entry.plugin!r} registers {entry.kind} with invalid name {entry.name!r}; "
                "names are non-empty and use letters, digits, '_', '-' and '.'"
            )
        if entry.config_model is not None and not (
            isinstance(entry.config_model, type) and issubclass(entry.config_model, BaseModel)
        ):
            raise PluginError(
                f"plugin {entry.plugin!r} registers {entry.kind} {entry.name!r} with config_model="
                f"{entry.config_model!r}; it must be a pydantic BaseModel subclass"
            )
        if entry.config_model is not None:
            declare_secret_fields(entry.config_model)
        if entry.name in self.disabled or f"{entry.kind}:{entry.name}" in self.disabled:
            self._skipped.append((entry.kind, entry.name, entry.plugin))
            return
        table = self._entries[entry.kind]
        if entry.name in table:
            first = table[entry.name]
            raise PluginError(
                f"plugin {entry.plugin!r} registers {entry.kind} {entry.name!r}, "
                f"already registered by {first.plugin!r}"
            )
        table[entry.name] = entry

    def get(self, kind: str, name: str, where: str = "") -> Entry:
        table = self._entries[kind]
        if name not in table:
            skipped = [s for s in self._skipped if s[0] == kind and s[1] == name]
            if skipped:
                raise ConfigError(
                    f"{kind} {name!r} is selected{' at ' + where if where else ''} but disabled "
                    f"(by 'disable: {name}'); remove it from 'disable' or select another {kind}"
                )
            error = UnknownNameError(kind, name, table, where)
            if self.blocked_plugins:
                error.args = (f"{error}; plugins disabled by the config are not loaded, so their components are absent: "
                              f"{', '.join(sorted(self.blocked_plugins))}",)
            raise error
        return table[name]

    def names(self, kind: str) -> list[str]:
        return sorted(self._entries[kind])

    def entries(self, kind: str | None = None) -> Iterator[Entry]:
        kinds = KINDS if kind is None else (kind,)
        for k in kinds:
            yield from (self._entries[k][n] for n in sorted(self._entries[k]))

    def skipped(self) -> list[tuple[str, str, str]]:
        """(kind, name, plugin) of registrations refused because they were disabled."""
        return list(self._skipped)

    def build(self, kind: str, name: str, config: dict[str, Any] | BaseModel | None = None, where: str = "") -> Any:
        return self.get(kind, name, where).build(config)


def _first_doc_line(obj: Any) -> str:
    doc = getattr(obj, "__doc__", None) or ""
    return doc.strip().splitlines()[0] if doc.strip() else ""
