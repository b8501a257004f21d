"""The device-side checksum behind output and input fingerprints on CUDA (run here on CPU tensors)."""

from __future__ import annotations

import pytest
import torch

from cuda_agent.harness import compare


@pytest.fixture(params=[1 << 24, 8], ids=["one_chunk", "many_chunks"])
def chunk(request, monkeypatch):  # type: ignore[no-untyped-def]
    monkeypatch.setattr(compare, "_CHUNK", request.param)
    monkeypatch.setattr(compare, "_WEIGHTS", {})
    return request.param


def _sum(t: torch.Tensor) -> int:
    return compare.device_checksum(t.contiguous().reshape(-1).view(torch.uint8))


def test_every_single_word_change_shows(chunk) -> None:  # type: ignore[no-untyped-def]
    x = torch.randn(203, generator=torch.Generator().manual_seed(0))
    base = _sum(x)
    for i in range(x.numel()):
        y = x.clone()
        y[i] = -y[i]  # the sign bit alone (bit 31 of the word)
        assert _sum(y) != base, i
        z = x.clone()
        z[i] = torch.nextafter(z[i], torch.tensor(float("inf")))  # the lowest bit alone
        assert _sum(z) != base, i


def test_positions_matter_and_equal_data_agrees(chunk) -> None:  # type: ignore[no-untyped-def]
    x = torch.arange(64, dtype=torch.float32)
    assert _sum(x) == _sum(x.clone())
    assert _sum(x) != _sum(x.flip(0))
    swapped = x.clone()
    swapped[[3, 40]] = swapped[[40, 3]]
    assert _sum(swapped) != _sum(x)


def test_byte_tensors_of_any_length(chunk) -> None:  # type: ignore[no-untyped-def]
    b = torch.arange(13, dtype=torch.uint8)
    c = b.clone()
    c[12] ^= 1
    assert compare.device_checksum(b) != compare.device_checksum(c)
    assert compare.device_checksum(b[1:]) != compare.device_checksum(b[:-1])  # unaligned views work too


def test_the_comparison_counts_across_chunks_and_reports_the_worst(chunk) -> None:  # type: ignore[no-untyped-def]
    e = torch.randn(10, 7, generator=torch.Generator().manual_seed(1)) * 5
    a = e.clone()
    a[6, 2] += 3.0
    a[1, 1] += 0.5
    a[9, 6] = float("nan")
    errs = compare.compare_output(e, a, atol=1e-2, rtol=1e-2)
    by = {x.check: x for x in errs}
    assert by["nan"].details["first_index"] == [9, 6] and by["nan"].details["nan"] == 1
    assert by["tolerance"].details["mismatched"] == 3 and by["tolerance"].details["worst_index"] == [6, 2]
    assert compare.compare_output(e, e.clone(), atol=1e-2, rtol=1e-2) == []
