"""Built-in skills ``cuda`` (the repository's root SKILL.md) and ``cpu``, registered through ``register_skills``.

The loop asks the plugin manager for the backend's skill by name, so core never reads ``cuda_agent.skills``
itself, and a third-party backend ships its own SKILL.md the same way.
"""

from __future__ import annotations

from functools import partial

from cuda_agent.hookspecs import hookimpl
from cuda_agent.skills import SKILL_FILES, load_skill

DESCRIPTIONS = {
    "cuda": "CUDA kernels in the release workspace layout (the repository's SKILL.md)",
    "cpu": "C++/OpenMP kernels for the cpu backend",
}


@hookimpl
def register_skills(register) -> None:
    """Register every skill document of ``cuda_agent.skills``."""
    for name in sorted(SKILL_FILES):
        register(name, partial(load_skill, name), description=DESCRIPTIONS.get(name, f"skill document {name!r}"))
