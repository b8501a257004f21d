"""Built-in task filters of data synthesis: runs, deterministic, informative, runtime_window, memory,
cpu_sizes.

Thin registration over :mod:`cuda_agent.training.synthesis.task_filters`;
each filter's drop reason id is its own name.
"""

from __future__ import annotations

from cuda_agent.hookspecs import hookimpl


@hookimpl
def register_task_filters(register):
    """Register the six execution filters with their config models."""
    from cuda_agent.training.synthesis.task_filters import FILTERS

    for name, cls in FILTERS.items():
        register(name, cls, config_model=cls.Config, description=(cls.__doc__ or "").strip().splitlines()[0])
