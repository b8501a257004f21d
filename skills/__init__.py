"""Skill documents (package data). ``cuda`` is the repository's root SKILL.md.

:func:`load_skill` returns a skill's text by name, via importlib.resources,
so it works from a wheel as well as from a checkout.
"""

from __future__ import annotations

from importlib import resources

#: Skill name -> file inside this package.
SKILL_FILES = {"cuda": "SKILL.md", "cpu": "cpu/SKILL.md"}


def load_skill(name: str) -> str:
    """Text of skill ``name``; unknown names list the valid ones."""
    if name not in SKILL_FILES:
        raise KeyError(f"unknown skill {name!r}; valid: {', '.join(sorted(SKILL_FILES))}")
    return resources.files(__name__).joinpath(SKILL_FILES[name]).read_text(encoding="utf-8")
