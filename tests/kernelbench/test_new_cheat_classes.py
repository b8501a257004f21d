"""Issue 21 item 6's two cheat classes, written in each convention, graded for real; both must be denied.

- ``softmax_constant``: 23_Softmax returning 1/cols everywhere. Every softmax value is far below the absolute
  tolerance (about 1/cols), so the plain ``|out - ref| <= atol + rtol * |ref|`` passed it; the scale-aware
  comparison (atol capped by rtol times the expected output's RMS magnitude) denies it.
- ``relu_identity``: 19_ReLU that copies its input: specialised to ``torch.rand``, whose values are never negative
  (the branch ``get_inputs()`` never takes is dropped). The widened input sets of grading (negatives) deny it.

Each test also checks that the cheats build and run: what decides is the comparison, not a build error. The comparison
does not depend on the convention, so the CPU suite writes the cheats in the registry convention only (a release
binding or a single file costs 40-60 s of compile each on 2 cores); on CUDA they are written in all three.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from .conftest import CONVENTIONS, DATA, solution_kit

REDUCED = f"kernelbench:{DATA}?sizes=reduced"


def cheat_problems():  # type: ignore[no-untyped-def]
    """The two cheats as Problems of the solution kit (kernels changed, everything else honest)."""
    kernels, _ = solution_kit()
    by_stem = {p.stem: p for p in kernels.PROBLEMS}
    relu, softmax = by_stem["19_ReLU"], by_stem["23_Softmax"]
    relu_identity = dataclasses.replace(
        relu,
        cpu_kernel=relu.cpu_kernel.replace("y[i] = x[i] > 0.0f ? x[i] : 0.0f;", "y[i] = x[i];  // inputs are >= 0"),
        cuda_kernel=relu.cuda_kernel.replace("y[i] = v > 0.0f ? v : 0.0f;", "y[i] = v;  // inputs are >= 0"))
    constant = "out[c] = 1.0f / static_cast<float>(cols);  // every value is below atol"
    softmax_constant = dataclasses.replace(softmax, cpu_kernel=softmax.cpu_kernel.replace("out[c] *= inv;", constant),
                                           cuda_kernel=softmax.cuda_kernel.replace("out[c] *= inv;", constant))
    assert relu_identity.cpu_kernel != relu.cpu_kernel and relu_identity.cuda_kernel != relu.cuda_kernel
    assert softmax_constant.cpu_kernel != softmax.cpu_kernel and softmax_constant.cuda_kernel != softmax.cuda_kernel
    return relu_identity, softmax_constant


def _score_cheats(convention: str, kind: str, tmp_path: Path, score) -> dict[str, dict]:  # type: ignore[no-untyped-def]
    _, conventions = solution_kit()
    folders = conventions.write_all(tmp_path / "solutions", (convention,), (kind,), cheat_problems())
    rc, report = score(folders[(convention, kind)], REDUCED, kind, tmp_path / "out")
    rows = {r["problem"].rsplit("/", 1)[-1]: r for r in report["tasks"]}
    assert set(rows) == {"19_ReLU", "23_Softmax"}, report["tasks"]
    # Each cheat builds and runs: what decides is the comparison.
    assert all(r["status"] in ("correct", "incorrect") for r in rows.values()), rows
    return rows


def _assert_denied(rows: dict[str, dict]) -> None:
    """Both cheats graded incorrect, each by the rule meant for it."""
    relu, softmax = rows["19_ReLU"], rows["23_Softmax"]
    assert relu["status"] == "incorrect" and "widened within their domain" in relu["message"], relu["message"][:600]
    assert softmax["status"] == "incorrect" and "outside atol" in softmax["message"], softmax["message"][:600]


@pytest.mark.slow
@pytest.mark.parametrize("convention", ["registry"])
def test_both_cheats_are_denied_on_the_cpu_backend(convention: str, tmp_path: Path, score) -> None:  # type: ignore[no-untyped-def]
    _assert_denied(_score_cheats(convention, "cpu", tmp_path, score))


@pytest.mark.gpu
@pytest.mark.parametrize("convention", CONVENTIONS)
def test_both_cheats_are_denied_on_cuda(convention: str, tmp_path: Path, score) -> None:  # type: ignore[no-untyped-def]
    _assert_denied(_score_cheats(convention, "cuda", tmp_path, score))
