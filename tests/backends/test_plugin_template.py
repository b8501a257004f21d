"""``cuda-agent plugin new``: the package it writes declares the hookspec version, loads through the plugin manager,
and its own tests (cuda-agent's conformance kit) pass as written, for each kind."""

from __future__ import annotations

import subprocess
import sys

import pytest

from cuda_agent import HOOKSPEC_VERSION
from cuda_agent.cli import main


@pytest.mark.parametrize("kind", ["backend", "reward", "tool"])
def test_the_package_written_passes_its_own_conformance_tests(tmp_path, kind):
    dest = tmp_path / f"acme-{kind}"
    assert main(["plugin", "new", f"acme-{kind}", "--kind", kind, "--out", str(dest)]) == 0
    module = f"acme_{kind}"
    plugin = (dest / module / "plugin.py").read_text()
    assert f'CUDA_AGENT_HOOKSPEC_VERSION = "{HOOKSPEC_VERSION}"' in plugin
    assert f'{module} = "{module}.plugin"' in (dest / "pyproject.toml").read_text()
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"], cwd=dest,
                         env={**__import__("os").environ, "PYTHONPATH": str(dest)}, capture_output=True, text=True,
                         timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert ("3 passed" if kind == "backend" else "1 passed") in run.stdout.splitlines()[-1]


def test_the_backend_template_registers_a_backend_and_its_skill(tmp_path):
    dest = tmp_path / "acme-gpu"
    assert main(["plugin", "new", "acme-gpu", "--out", str(dest)]) == 0
    sys.path.insert(0, str(dest))
    try:
        from acme_gpu import plugin

        from cuda_agent.plugin_manager import PluginManager

        pm = PluginManager(load_entrypoints=False, extra_plugins=[("acme_gpu", plugin)])
        assert pm.registry.get("skill", "acme_gpu").backend == "acme_gpu"
        assert pm.registry.build("backend", "acme_gpu").adapter.runner_loader == "acme_gpu.runner:Loader"
    finally:
        sys.path.remove(str(dest))
        for name in [m for m in sys.modules if m == "acme_gpu" or m.startswith("acme_gpu.")]:
            del sys.modules[name]


def test_bad_names_and_busy_folders_are_refused(tmp_path, capsys):
    assert main(["plugin", "new", "Bad Name", "--out", str(tmp_path / "x")]) == 2
    assert "lowercase letters, digits" in capsys.readouterr().err
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "f").write_text("x")
    assert main(["plugin", "new", "ok", "--out", str(tmp_path / "busy")]) == 2
    assert "exists and is not empty" in capsys.readouterr().err
