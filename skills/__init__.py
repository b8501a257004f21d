"""Skill documents (package data): the built-in skills, discovered from the files of this package.

The root ``SKILL.md`` (a link to the repository's) is the skill ``cuda``; every ``<name>/SKILL.md`` below this
folder is the skill ``<name>`` (``cpu/SKILL.md`` -> ``cpu``). Adding a folder with a ``SKILL.md`` adds a skill;
there is no list to keep in step. :func:`load_skill` reads a skill through importlib.resources, so it works from
a wheel as well as from a checkout. Plugins register these (and third-party packages their own) through the
``register_skills`` hook; the loop reads skills only from there.
"""

from __future__ import annotations

from importlib import resources

#: The skill the root ``SKILL.md`` is (the repository's own, for CUDA).
ROOT_SKILL = "cuda"
#: File name of a skill document.
SKILL_FILE = "SKILL.md"


def skill_files() -> dict[str, str]:
    """Skill name -> file inside this package: the root ``SKILL.md`` and every ``<name>/SKILL.md``."""
    root = resources.files(__name__)
    found: dict[str, str] = {}
    if root.joinpath(SKILL_FILE).is_file():
        found[ROOT_SKILL] = SKILL_FILE
    for entry in sorted(root.iterdir(), key=lambda e: e.name):
        if entry.is_dir() and not entry.name.startswith(("_", ".")) and entry.joinpath(SKILL_FILE).is_file():
            found[entry.name] = f"{entry.name}/{SKILL_FILE}"
    return found


def load_skill(name: str) -> str:
    """Text of skill ``name``; unknown names list the valid ones."""
    files = skill_files()
    if name not in files:
        raise KeyError(f"unknown skill {name!r}; valid: {', '.join(sorted(files))}")
    return resources.files(__name__).joinpath(files[name]).read_text(encoding="utf-8")
