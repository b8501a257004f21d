"""A fresh pluggy plugin manager per run, and the registry it fills.

Load order: block disabled plugin names (before import, like pytest's
``-p no:name``), register built-ins (every public module under
``cuda_agent.plugins.<kind>/``), load ``cuda_agent`` entry points, then
``check_pending()`` so a misspelled hookimpl fails loudly, then call every
``register_*`` hook into a :class:`~cuda_agent.registry.Registry`.

Environment: ``CUDA_AGENT_PLUGINS`` restricts which entry-point plugins
load (comma list of entry-point names; empty string loads none), like
simonw/llm's ``LLM_LOAD_PLUGINS``.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import metadata
from typing import Any

import pluggy

from cuda_agent import HOOKSPEC_VERSION, __version__, hookspecs
from cuda_agent.errors import ConfigError, PluginError
from cuda_agent.registry import HOOK_FOR_KIND, KINDS, Registry

ENTRY_POINT_GROUP = "cuda_agent"
BUILTIN_PACKAGE = "cuda_agent.plugins"
#: Sub-folders of ``plugins/`` scanned for built-in plugin modules.
BUILTIN_FOLDERS: tuple[str, ...] = (
    "tools", "rewards", "backends", "policies", "data", "stages", "loggers", "skills", "commands",
)
#: Plugins that cannot be disabled: the loop cannot end an episode without them.
ESSENTIAL_PLUGINS: frozenset[str] = frozenset({"tools.finish"})


@dataclass(frozen=True)
class PluginInfo:
    """What ``cuda-agent plugins`` prints and every run record stores."""

    name: str
    hooks: tuple[str, ...]
    distribution: str
    version: str
    builtin: bool
    components: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "hooks": list(self.hooks),
            "distribution": self.distribution,
            "version": self.version,
            "builtin": self.builtin,
            "components": list(self.components),
        }


def builtin_plugin_modules(folders: Iterable[str] = BUILTIN_FOLDERS) -> dict[str, str]:
    """Built-in plugin name (``tools.files``) -> module path, discovered on disk.

    Every module under ``plugins/<folder>/`` whose name does not start with ``_``
    is a built-in plugin; helpers of a plugin are private (``_name.py``).
    """
    found: dict[str, str] = {}
    for folder in folders:
        pkg = importlib.import_module(f"{BUILTIN_PACKAGE}.{folder}")
        for info in pkgutil.iter_modules(pkg.__path__):
            if not info.name.startswith("_"):
                found[f"{folder}.{info.name}"] = f"{BUILTIN_PACKAGE}.{folder}.{info.name}"
    return dict(sorted(found.items()))


def hookspec_mismatch(declared: str, provided: str = HOOKSPEC_VERSION) -> str | None:
    """Why a plugin written for hookspec version ``declared`` cannot load on ``provided`` (None: it can).

    Same MAJOR and a MINOR no newer than the host's loads: a minor version only adds (a hook, an optional
    argument), so a plugin written for 1.1 may use what a 1.0 host lacks.
    """
    try:
        d_major, d_minor = (int(x) for x in (declared.split(".") + ["0"])[:2])
        p_major, p_minor = (int(x) for x in (provided.split(".") + ["0"])[:2])
    except ValueError:
        return f"'{declared}' is not MAJOR.MINOR"
    if d_major != p_major:
        return "major versions differ"
    if d_minor > p_minor:
        return "the plugin needs a newer minor version: upgrade cuda-agent"
    return None


class PluginManager:
    """Typed wrapper over :class:`pluggy.PluginManager` with the component registry.

    :param disable: plugin names (``tools.profile``, an entry-point name) and/or
        component names (``profile``, ``tool:profile``) to leave out. Plugin
        names are blocked before import; component names are refused at
        registration, so one component of a multi-component package can go.
    :param load_entrypoints: load third-party plugins from the ``cuda_agent``
        entry-point group (still filtered by ``CUDA_AGENT_PLUGINS``).
    :param extra_plugins: objects or modules registered after the built-ins
        (tests and embedding applications use this).
    :param builtin_folders: which ``plugins/<folder>`` built-ins to load (the CLI loads only
        ``commands`` to build its parser quickly).
    """

    def __init__(
        self,
        disable: Iterable[str] = (),
        *,
        load_entrypoints: bool = True,
        extra_plugins: Iterable[tuple[str, object]] = (),
        builtin_folders: Iterable[str] = BUILTIN_FOLDERS,
    ) -> None:
        self.disabled = set(disable)
        essential = self.disabled & ESSENTIAL_PLUGINS
        if essential:
            raise PluginError(
                f"plugin(s) {', '.join(sorted(essential))} are essential and cannot be disabled"
            )
        self._distinfo: dict[str, tuple[str, str]] = {}
        self.pm = pluggy.PluginManager(hookspecs.PROJECT_NAME)
        self.pm.add_hookspecs(hookspecs)
        builtins = builtin_plugin_modules(builtin_folders)
        for name in self.disabled:
            self.pm.set_blocked(name)
        self._builtin_names: set[str] = set()
        for name, module_path in builtins.items():
            if self.pm.is_blocked(name):
                continue
            module = importlib.import_module(module_path)
            self._register(module, name)
            self._builtin_names.add(name)
        if load_entrypoints:
            self._load_entrypoints()
        for name, obj in extra_plugins:
            if not self.pm.is_blocked(name):
                self._register(obj, name)
        try:
            self.pm.check_pending()
        except pluggy.PluginValidationError as exc:
            raise PluginError(f"{exc} (a hookimpl whose name matches no hookspec; check its spelling)") from exc
        # blocked names show up in list_name_plugin() with plugin None: only real plugins are plugin names
        component_names = self.disabled - set(builtins) - {n for n, p in self.pm.list_name_plugin() if p is not None}
        self.registry = Registry(disabled=component_names, blocked_plugins=self.disabled - component_names)
        self._components: dict[str, list[str]] = {}
        self._fill_registry()

    # -- loading -----------------------------------------------------------
    def _register(self, plugin: object, name: str) -> None:
        declared = getattr(plugin, "CUDA_AGENT_HOOKSPEC_VERSION", None)
        problem = None if declared is None else hookspec_mismatch(str(declared))
        if problem:
            raise PluginError(f"plugin {name!r} was written for hookspec version {declared}, "
                              f"this cuda-agent provides {HOOKSPEC_VERSION} ({problem})")
        try:
            self.pm.register(plugin, name=name)
        except ValueError as exc:
            raise PluginError(f"plugin name {name!r} is registered twice: {exc}") from exc
        except pluggy.PluginValidationError as exc:
            raise PluginError(f"plugin {name!r} is invalid: {exc}") from exc

    def _load_entrypoints(self) -> None:
        allowed_env = os.environ.get("CUDA_AGENT_PLUGINS")
        allowed = None if allowed_env is None else {s.strip() for s in allowed_env.split(",") if s.strip()}
        for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
            if allowed is not None and ep.name not in allowed:
                continue
            if self.pm.is_blocked(ep.name) or self.pm.has_plugin(ep.name):
                continue
            try:
                plugin = ep.load()
            except Exception as exc:  # a broken third-party package must say which one
                raise PluginError(f"entry point {ep.name!r} ({ep.value}) failed to load: {exc!r}") from exc
            self._register(plugin, ep.name)
            self._distinfo[ep.name] = (ep.dist.name if ep.dist else "?", ep.dist.version if ep.dist else "?")

    def _fill_registry(self) -> None:
        for kind in KINDS:
            hook_name = HOOK_FOR_KIND[kind]
            for impl in getattr(self.pm.hook, hook_name).get_hookimpls():
                before = set(self.registry.names(kind))
                impl.function(register=self.registry.callback(kind, impl.plugin_name))
                added = set(self.registry.names(kind)) - before
                self._components.setdefault(impl.plugin_name, []).extend(f"{kind}:{n}" for n in sorted(added))

    # -- queries -----------------------------------------------------------
    def plugins(self) -> list[PluginInfo]:
        """Every loaded plugin with its hooks, distribution and version."""
        infos = []
        for name, plugin in self.pm.list_name_plugin():
            if plugin is None:
                continue
            hooks = tuple(sorted(h.name for h in self.pm.get_hookcallers(plugin) or []))
            builtin = name in self._builtin_names
            dist, version = ("cuda-agent", __version__) if builtin else self._distinfo.get(name, ("(local)", "?"))
            infos.append(PluginInfo(name, hooks, dist, version, builtin, tuple(self._components.get(name, []))))
        return sorted(infos, key=lambda p: (not p.builtin, p.name))

    def check_selected(self, selected: dict[str, str]) -> None:
        """Refuse a config that selects what it also disables.

        :param selected: config location (``backend``) -> the component name it selects.
        """
        for where, name in selected.items():
            if name in self.disabled or any(name == d.split(":", 1)[-1] for d in self.disabled):
                raise ConfigError(
                    f"config selects {name!r} at {where!r} but also disables it (disable: "
                    f"{sorted(self.disabled)}); drop one of the two"
                )

    def is_builtin(self, plugin_name: str) -> bool:
        """The plugin is one of cuda-agent's own (``cuda_agent.plugins.*``)."""
        return plugin_name in self._builtin_names

    def skill_text(self, name: str, where: str = "backend.skill") -> str:
        """The text of skill document ``name`` (registered through ``register_skills``)."""
        return str(self.registry.build("skill", name, where=where))

    def skill_problems(self, backend: str, skill: str) -> list[str]:
        """What is wrong with backend ``backend`` naming skill ``skill`` (empty: nothing).

        The skill must be registered, and when it was registered for a backend (``register(..., backend=...)``),
        for this one; a skill registered for no backend may serve any.
        """
        if skill not in self.registry.names("skill"):
            return [f"backend {backend!r} names skill {skill!r}, which no plugin registers (register_skills); "
                    f"registered skills: {', '.join(self.registry.names('skill')) or '(none)'}"]
        entry = self.registry.get("skill", skill)
        if entry.backend is not None and entry.backend != backend:
            return [f"backend {backend!r} names skill {skill!r}, which plugin {entry.plugin!r} registered for backend "
                    f"{entry.backend!r}"]
        return []

    def doctor_checks(self) -> dict[str, dict[str, Any]]:
        """Every plugin's ``doctor_checks``, merged; a check name reported twice is an error naming both."""
        merged: dict[str, dict[str, Any]] = {}
        owner: dict[str, str] = {}
        for impl in self.pm.hook.doctor_checks.get_hookimpls():
            for name, result in (impl.function() or {}).items():
                if name in merged:
                    raise PluginError(f"plugin {impl.plugin_name!r} reports doctor check {name!r}, "
                                      f"already reported by {owner[name]!r}")
                merged[name], owner[name] = dict(result), impl.plugin_name
        return merged

    # -- observer hooks (typed wrappers, so call sites are checked) ----------
    def on_episode_start(self, *, run_id: str, task_id: str, config: Any) -> None:
        self.pm.hook.on_episode_start(run_id=run_id, task_id=task_id, config=config)

    def on_turn_end(self, *, run_id: str, turn: Any) -> None:
        self.pm.hook.on_turn_end(run_id=run_id, turn=turn)

    def on_episode_end(self, *, run_id: str, end: Any) -> None:
        self.pm.hook.on_episode_end(run_id=run_id, end=end)

    def on_train_step(self, *, stage: str, step: int, metrics: dict[str, float]) -> None:
        self.pm.hook.on_train_step(stage=stage, step=step, metrics=metrics)


