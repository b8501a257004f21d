"""Build a run's components (policy, backend, reward, tools) from its config and registry.

Also checks the config against the plugin manager: selected-but-disabled
components and ``plugins.<name>`` blocks naming no component are errors that
list what is valid.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cuda_agent.config import RunConfig, deep_merge
from cuda_agent.errors import ConfigError
from cuda_agent.plugin_manager import PluginManager
from cuda_agent.protocols import tool_schema
from cuda_agent.schemas.messages import ToolSchema
from cuda_agent.specs import Spec, parse_spec


#: Component kinds that take no ``plugins.<name>`` block (commands and skill documents).
NO_BLOCK_KINDS = frozenset({"command", "skill"})


@dataclass
class Components:
    """The built components of one episode."""

    policy: Any
    backend: Any
    reward: Any
    tools: dict[str, Any]
    policy_spec: Spec

    @property
    def schemas(self) -> list[ToolSchema]:
        """Tool schemas the model sees, in offering order."""
        return [tool_schema(t) for t in self.tools.values()]


def policy_spec(config: RunConfig) -> Spec:
    """The parsed ``policy`` spec of the config."""
    return parse_spec(config.policy, kind="policy")


def tool_names(config: RunConfig, pm: PluginManager) -> list[str]:
    """The tools offered, in order: ``tools`` as given, else every built-in tool and then ``extra_tools``.

    Third-party tools are opt-in: a run's prompt depends on its config, not on which packages are installed
    (the system prompt hash in every result's provenance records the tools either way).
    """
    if config.tools is not None:
        return list(config.tools)
    builtin = [e.name for e in pm.registry.entries("tool") if pm.is_builtin(e.plugin)]
    return builtin + [n for n in config.extra_tools if n not in builtin]


def check_config_against_plugins(config: RunConfig, pm: PluginManager) -> None:
    """Refuse selecting a disabled component and unknown ``plugins.<name>`` blocks."""
    missing = set(config.disable) - pm.disabled
    if missing:
        raise ConfigError(
            f"the plugin manager was built without disable={sorted(missing)} from the config; "
            "build it with PluginManager(disable=config.disable)"
        )
    selected = {"policy": policy_spec(config).name, "backend": config.backend, "reward": config.reward}
    for i, name in enumerate(config.tools or []):
        selected[f"tools[{i}]"] = name
    for i, name in enumerate(config.extra_tools):
        selected[f"extra_tools[{i}]"] = name
    pm.check_selected(selected)
    known = {e.name for e in pm.registry.entries() if e.kind not in NO_BLOCK_KINDS} | {s[1] for s in pm.registry.skipped()}
    for block in config.plugins:
        if block not in known:
            raise ConfigError(
                f"config block plugins.{block} names no registered component; valid: {', '.join(sorted(known))}"
            )


def _entries_named(pm: PluginManager, name: str) -> list[Any]:
    return [e for e in pm.registry.entries() if e.name == name]


def policy_block(config: RunConfig, pm: PluginManager) -> dict[str, Any]:
    """The policy's config: its ``plugins.<name>`` block with the spec's target and parameters over it."""
    spec = policy_spec(config)
    entry = pm.registry.get("policy", spec.name, where="policy")
    target_field = getattr(entry.config_model, "spec_target", "target") if entry.config_model else "target"
    return deep_merge(config.plugins.get(spec.name, {}), spec.config(target_field))


def check_components(config: RunConfig, pm: PluginManager) -> dict[str, Any]:
    """Validate without building: every selected component exists and is enabled, every block validates.

    :returns: component name -> its effective config (defaults filled in) for each selected component and each
        ``plugins.<name>`` block, as ``cuda-agent config show`` prints them.
    """
    check_config_against_plugins(config, pm)
    selected = [("policy", policy_spec(config).name, policy_block(config, pm), "policy"),
                ("reward", config.reward, config.plugins.get(config.reward, {}), "reward"),
                ("backend", config.backend, config.plugins.get(config.backend, {}), "backend")]
    selected += [("tool", name, config.plugins.get(name, {}), f"tools[{i}]") for i, name in enumerate(tool_names(config, pm))]
    effective: dict[str, Any] = {}
    for kind, name, block, where in selected:
        effective[name] = _validated(pm.registry.get(kind, name, where=where), block)
    for name, block in config.plugins.items():
        if name not in effective:
            for entry in (e for e in _entries_named(pm, name) if e.kind not in NO_BLOCK_KINDS):
                effective[name] = _validated(entry, block)
    return effective


def _validated(entry: Any, block: dict[str, Any]) -> dict[str, Any]:
    if entry.config_model is None:
        if block:
            entry.build(block)  # refuses the keys, naming the component
        return {}
    return entry.validate_config(block).model_dump(mode="json")


def build_policy(config: RunConfig, pm: PluginManager) -> Any:
    """Policy from the spec, merged over its ``plugins.<name>`` block (the spec wins)."""
    return pm.registry.get("policy", policy_spec(config).name, where="policy").build(policy_block(config, pm))


def build_components(config: RunConfig, pm: PluginManager, *, policy: Any = None, backend: Any = None) -> Components:
    """Build everything an episode needs; passed-in policy/backend are used as given."""
    check_config_against_plugins(config, pm)
    registry = pm.registry
    if backend is None:
        backend = registry.build("backend", config.backend, config.plugins.get(config.backend), where="backend")
    if policy is None:
        policy = build_policy(config, pm)
    reward = registry.build("reward", config.reward, config.plugins.get(config.reward), where="reward")
    names = tool_names(config, pm)
    tools = {}
    for i, name in enumerate(names):
        tool = registry.build("tool", name, config.plugins.get(name), where=f"tools[{i}]")
        if tool.name != name:
            raise ConfigError(f"tool registered as {name!r} calls itself {tool.name!r}; the two must agree")
        tools[name] = tool
    return Components(policy=policy, backend=backend, reward=reward, tools=tools, policy_spec=policy_spec(config))

