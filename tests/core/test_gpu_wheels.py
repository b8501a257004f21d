"""scripts/make_gpu_wheels.sh refuses to ship an inconsistent wheel set (the pydantic-core that broke the GPU machine).

Offline: the wheels here are minimal real wheel archives (METADATA only); ``SELF_ONLY=1`` rebuilds cuda-agent's own
wheels and then runs the same check the full build runs before shipping.
"""

from __future__ import annotations

import os
import subprocess
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def fake_wheel(dest: Path, name: str, version: str, requires: list[str]) -> None:
    dist = f"{name.replace('-', '_')}-{version}"
    meta = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n" + "".join(f"Requires-Dist: {r}\n" for r in requires)
    with zipfile.ZipFile(dest / f"{dist}-py3-none-any.whl", "w") as zf:
        zf.writestr(f"{dist}.dist-info/METADATA", meta)
        zf.writestr(f"{dist}.dist-info/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        zf.writestr(f"{dist}.dist-info/RECORD", "")


@pytest.mark.slow
def test_a_pydantic_core_beside_the_wrong_pydantic_is_refused(tmp_path):
    dest = tmp_path / "whl"
    dest.mkdir()
    fake_wheel(dest, "pydantic", "2.13.4", ["pydantic-core==2.46.4", "annotated-types>=0.6.0"])
    fake_wheel(dest, "pydantic-core", "2.50.5", ["typing-extensions>=4.14.1"])  # what a newer environment packed
    done = subprocess.run(["bash", str(ROOT / "scripts" / "make_gpu_wheels.sh"), str(dest)], cwd=ROOT,
                          env={**os.environ, "SELF_ONLY": "1", "PY_CHECK": "/nonexistent"},
                          capture_output=True, text=True, timeout=600)
    assert done.returncode != 0, done.stdout
    assert "pydantic 2.13.4 pins pydantic-core==2.46.4, the set has 2.50.5" in done.stderr
