"""The runner's description of where it staged its outputs is the candidate's word: the trusted reference must
read only the runner's own slot files, as regular files, never where a name or a symlink leads. Real processes:
the candidate patches the runner's staging code from inside its sandbox (what a kernel past the static rules could
do), the reference reads."""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

PATCHING = """
import os
from pathlib import Path

import torch
import torch.nn as nn
import cuda_extension
import cuda_agent.harness._staging as staging

SECRET = {secret!r}
_write = staging.SlotWriter.write


def write(self, name, t):
    path = _write(self, name, t)
{patch}


staging.SlotWriter.write = write


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        cuda_extension.relu_forward(x, out)
        return out
"""

#: Describe the output as the secret file itself.
ELSEWHERE = "    return Path(SECRET)"
#: Keep the slot's name, make it a symlink to the secret file.
SYMLINKED = """    link = path.with_name(path.name + ".lnk")
    os.symlink(SECRET, link)
    os.replace(link, path)
    return path"""


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    """A file only the trusted side can see, exactly the size of the relu task's output (8 x 256 float32)."""
    path = tmp_path / "secret.bin"
    path.write_bytes(b"\x00" * (8 * 256 * 4))
    return path


def _model(secret: Path, patch: str) -> str:
    return PATCHING.format(secret=str(secret), patch=patch)


def test_an_output_described_as_another_file_is_a_violation(cpu_evaluator, make_ws, kit, tasks, secret) -> None:  # type: ignore[no-untyped-def]
    result = cpu_evaluator.verify(tasks.relu, make_ws(_model(secret, ELSEWHERE)), kit)
    assert result.status.value == "rejected", result.summary_for_agent()
    assert result.rule == "T23.runtime.export_path", result.summary_for_agent()


def test_a_slot_made_a_symlink_is_not_followed(cpu_evaluator, make_ws, kit, tasks, secret) -> None:  # type: ignore[no-untyped-def]
    result = cpu_evaluator.verify(tasks.relu, make_ws(_model(secret, SYMLINKED)), kit)
    text = result.summary_for_agent()
    # The reference refused to open it (not compared with the secret), and the runner's own rewrite of the slot
    # would not follow it either (O_NOFOLLOW on both sides): the run fails, the secret never read.
    assert result.status.value in ("incorrect", "error"), text
    assert "could not read it: [Errno 40] Too many levels of symbolic links" in text, text
