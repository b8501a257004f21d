"""The trusted execution side: workspaces, builds, sandboxed candidate processes, verification, timing, integrity
checks, grading, evaluation runner and reports.

Imports ``cuda_agent`` (core) only; never ``cuda_agent.plugins``. ``plugins/`` and ``training/`` use the names
below (or the harness's public modules: ``build``, ``layout``, ``tasks``, ``workspace``, ``evaluation``,
``integrity``), never a ``cuda_agent.harness._private`` module. The names load on first use, so a process that
imports one harness module (the sandboxed candidate runner) does not import the rest.

Evaluating candidates:
    :class:`Evaluator` (verify, profile, grade one built candidate), :class:`HarnessSettings` and its blocks
    (:class:`VerifySettings`, :class:`TimingSettings`, :class:`SandboxSettings`, :class:`LimitSettings`,
    :class:`IntegritySettings`), :class:`ExperimentSettings` (benchmarks and tests only), :func:`usable_cpus`.
Backends (docs/backends.md):
    :class:`DeviceAdapter` and :class:`RunnerLoader` (the device-adapter protocol), :class:`DeviceBackend` (a whole
    backend over an adapter), :class:`BackendConfig` (its ``plugins.<backend>`` block), :data:`DEVICE_KINDS`.
Sandboxes for other processes (the data pipeline's execution probe):
    :class:`BwrapSpec`, :class:`Isolation`, :func:`resolve_isolation`, :class:`IsolationUnavailable`,
    :data:`UNPRIVILEGED_UID`, :func:`spawn_process` (start a long-lived process from the harness's spawner thread).
Toolchain and build logs:
    :func:`find_nvcc`, :func:`device_arch`, :func:`trim_log`, :func:`parse_errors`.
"""

from __future__ import annotations

import importlib
from typing import Any

#: Public name -> (module, attribute) it is loaded from.
_PUBLIC: dict[str, tuple[str, str]] = {
    "Evaluator": ("evaluator", "Evaluator"),
    "HarnessSettings": ("settings", "HarnessSettings"),
    "VerifySettings": ("settings", "VerifySettings"),
    "TimingSettings": ("settings", "TimingSettings"),
    "SandboxSettings": ("settings", "SandboxSettings"),
    "LimitSettings": ("settings", "LimitSettings"),
    "IntegritySettings": ("settings", "IntegritySettings"),
    "usable_cpus": ("settings", "usable_cpus"),
    "ExperimentSettings": ("experiments", "ExperimentSettings"),
    "DeviceAdapter": ("device_adapter", "DeviceAdapter"),
    "RunnerLoader": ("device_adapter", "RunnerLoader"),
    "DEVICE_KINDS": ("device_adapter", "DEVICE_KINDS"),
    "DeviceBackend": ("device_backend", "DeviceBackend"),
    "BackendConfig": ("device_backend", "BackendConfig"),
    "BwrapSpec": ("_bwrap", "BwrapSpec"),
    "Isolation": ("_bwrap", "Isolation"),
    "IsolationUnavailable": ("_bwrap", "IsolationUnavailable"),
    "UNPRIVILEGED_UID": ("_bwrap", "UNPRIVILEGED_UID"),
    "resolve_isolation": ("_bwrap", "resolve_isolation"),
    "spawn_process": ("_spawner", "popen"),
    "find_nvcc": ("_toolchain", "find_nvcc"),
    "device_arch": ("_toolchain", "device_arch"),
    "trim_log": ("_build_log", "trim_log"),
    "parse_errors": ("_build_log", "parse_errors"),
}

__all__ = sorted(_PUBLIC)


def __getattr__(name: str) -> Any:
    """Load a public name on first use (PEP 562)."""
    try:
        module, attr = _PUBLIC[name]
    except KeyError:
        raise AttributeError(f"module 'cuda_agent.harness' has no attribute {name!r}; public names: "
                             f"{', '.join(__all__)}") from None
    value = getattr(importlib.import_module(f"cuda_agent.harness.{module}"), attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
