"""Built-in skills ``cuda`` (the repository's root SKILL.md) and ``cpu``, registered through ``register_skills``.

The skills are the files of :mod:`cuda_agent.skills` (found on disk, no list to keep in step), each registered
for the backend of the same name. The loop asks the plugin manager for the backend's skill by name, so core never
reads ``cuda_agent.skills`` itself, and a third-party backend ships its own SKILL.md the same way
(docs/backends.md).
"""

from __future__ import annotations

from functools import partial

from cuda_agent.hookspecs import hookimpl
from cuda_agent.skills import load_skill, skill_files

DESCRIPTIONS = {
    "cuda": "CUDA kernels in the release workspace layout (the repository's SKILL.md)",
    "cpu": "C++/OpenMP kernels for the cpu backend",
}


@hookimpl
def register_skills(register) -> None:
    """Register every skill document of ``cuda_agent.skills``, each for the backend of its name."""
    for name in sorted(skill_files()):
        register(name, partial(load_skill, name), backend=name,
                 description=DESCRIPTIONS.get(name, f"skill document {name!r}"))
