"""Packaging: the wheel holds every subpackage, the root SKILL.md byte-identical, py.typed and templates."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MAPPED = {"core": "cuda_agent", "plugins": "cuda_agent.plugins", "skills": "cuda_agent.skills",
          "harness": "cuda_agent.harness", "training": "cuda_agent.training"}


def pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_every_package_folder_is_listed():
    listed = set(pyproject()["tool"]["setuptools"]["packages"])
    found = set()
    for folder, prefix in MAPPED.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            if "__pycache__" in init.parts:
                continue
            rel = init.parent.relative_to(ROOT / folder).parts
            found.add(".".join([prefix, *rel]))
    assert found - listed == set(), f"add to pyproject [tool.setuptools] packages: {sorted(found - listed)}"
    assert listed - found == set(), f"listed but no __init__.py: {sorted(listed - found)}"


def test_skill_loads_as_package_data():
    from cuda_agent.skills import load_skill

    assert load_skill("cuda").encode() == (ROOT / "SKILL.md").read_bytes()


@pytest.fixture(scope="session")
def wheel(tmp_path_factory) -> Path:
    """Build the wheel from a copy of the tree (concurrent builds in the shared tree would collide)."""
    src = tmp_path_factory.mktemp("src")
    for name in ("pyproject.toml", "SKILL.md", "README.md", "LICENSE"):
        if (ROOT / name).exists():
            shutil.copy2(ROOT / name, src / name)
    if not (src / "README.md").exists():
        (src / "README.md").write_text("# cuda-agent\n")  # the readme is checked elsewhere; the wheel needs a file
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.so", "*.o")
    for folder in MAPPED:
        shutil.copytree(ROOT / folder, src / folder, symlinks=True, ignore=ignore)
    out = tmp_path_factory.mktemp("dist")
    proc = subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(out), str(src)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return next(out.glob("*.whl"))


@pytest.mark.slow
def test_wheel_contents(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    for package in pyproject()["tool"]["setuptools"]["packages"]:
        init = package.replace(".", "/") + "/__init__.py"
        assert init in names, f"{init} missing from the wheel"
    assert "cuda_agent/py.typed" in names
    assert "cuda_agent/templates/system.j2" in names and "cuda_agent/templates/task.j2" in names
    assert zipfile.ZipFile(wheel).read("cuda_agent/skills/SKILL.md") == (ROOT / "SKILL.md").read_bytes()
    assert "cuda_agent/skills/cpu/SKILL.md" in names
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    assert "cuda-agent = cuda_agent.cli:main" in zipfile.ZipFile(wheel).read(entry_points).decode()
    assert not any(n.startswith("tests/") for n in names)
