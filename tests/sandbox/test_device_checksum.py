"""The device-side checksum behind output and input fingerprints on CUDA (run here on CPU tensors; the GPU test
below checks that CUDA gives the CPU's numbers)."""

from __future__ import annotations

import pytest
import torch

from cuda_agent.harness import checksum, compare


@pytest.fixture(params=["matmul", "float64"])
def small_rows(request, monkeypatch):  # type: ignore[no-untyped-def]
    """Rows of 64 bytes (16 words), blocks of 20 rows: a few hundred bytes cover several rows, blocks and a tail,
    through the int8 product or (MIN_MM_ROWS out of reach) the float64 one."""
    monkeypatch.setattr(checksum, "ROW_BYTES", 64)
    monkeypatch.setattr(checksum, "BLOCK_ROWS", 20)
    monkeypatch.setattr(checksum, "COPY_ROWS", 18)
    monkeypatch.setattr(checksum, "_WEIGHTS", {})
    monkeypatch.setattr(checksum, "_INT8_OK", {})
    if request.param == "float64":
        monkeypatch.setattr(checksum, "MIN_MM_ROWS", 1 << 30)
    return request.param


def _sum(t: torch.Tensor) -> int:
    return checksum.device_checksum(t.contiguous().reshape(-1).view(torch.uint8))


def test_every_single_word_change_shows(small_rows) -> None:  # type: ignore[no-untyped-def]
    x = torch.randn(21 * 16 + 5, generator=torch.Generator().manual_seed(0))  # 21 rows and a tail of 5 words
    base = _sum(x)
    for i in range(x.numel()):
        y = x.clone()
        y[i] = -y[i]  # the sign bit alone (bit 31 of the word)
        assert _sum(y) != base, i
        z = x.clone()
        z[i] = torch.nextafter(z[i], torch.tensor(float("inf")))  # the lowest bit alone
        assert _sum(z) != base, i
        w = x.clone()
        w.view(torch.int32)[i] ^= 0x00FFFF00  # the two middle bytes at once
        assert _sum(w) != base, i


def test_every_single_byte_change_shows(small_rows) -> None:  # type: ignore[no-untyped-def]
    b = torch.randint(0, 256, (19 * 64 + 7,), dtype=torch.uint8, generator=torch.Generator().manual_seed(2))
    base = checksum.device_checksum(b)
    for i in range(b.numel()):
        for flip in (1, 0x80, 0xFF):
            c = b.clone()
            c[i] ^= flip
            assert checksum.device_checksum(c) != base, (i, flip)


def test_positions_matter_and_equal_data_agrees(small_rows) -> None:  # type: ignore[no-untyped-def]
    x = torch.arange(23 * 16, dtype=torch.float32)
    assert _sum(x) == _sum(x.clone())
    assert _sum(x) != _sum(x.flip(0))
    for i, j in ((3, 5), (3, 40), (0, 16 * 21), (17, 16 * 22 + 1)):  # in a row, across rows, across blocks
        swapped = x.clone()
        swapped[[i, j]] = swapped[[j, i]]
        assert _sum(swapped) != _sum(x), (i, j)
    rows = x.view(23, 16)
    assert _sum(rows[[1, 0] + list(range(2, 23))]) != _sum(rows)  # two whole rows swapped


def test_the_number_depends_on_the_bytes_alone(small_rows, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """An offset view (not aligned for the matrix product) sums like its copy; block sizes and the path taken do not
    change the number (the runner fingerprints what it returns, the trusted side what it received)."""
    b = torch.randint(0, 256, (45 * 64 + 3,), dtype=torch.uint8, generator=torch.Generator().manual_seed(3))
    for offset in (1, 2, 4, 8, 15):
        view = b[offset:]
        assert view.data_ptr() % 16 != 0
        assert checksum.device_checksum(view) == checksum.device_checksum(view.clone())
    assert checksum.device_checksum(b[1:]) != checksum.device_checksum(b[:-1])
    first = checksum.device_checksum(b)
    monkeypatch.setattr(checksum, "BLOCK_ROWS", 7)
    assert checksum.device_checksum(b) == first
    monkeypatch.setattr(checksum, "MIN_MM_ROWS", 1 << 30 if small_rows == "matmul" else 17)
    assert checksum.device_checksum(b) == first


def test_a_platform_without_the_int8_product_gets_the_same_numbers(small_rows, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    b = torch.randint(0, 256, (45 * 64 + 3,), dtype=torch.uint8, generator=torch.Generator().manual_seed(5))
    first = checksum.device_checksum(b)

    def refuse(*args: object) -> None:
        raise RuntimeError("int8 GEMM is not supported here")

    monkeypatch.setattr(torch, "_int_mm", refuse)
    monkeypatch.setattr(checksum, "_INT8_OK", {})
    assert checksum.device_checksum(b) == first
    assert checksum._INT8_OK == ({"cpu": False} if small_rows == "matmul" else {})  # asked only where used


def test_short_tensors_are_all_tail(small_rows) -> None:  # type: ignore[no-untyped-def]
    b = torch.arange(13, dtype=torch.uint8)
    c = b.clone()
    c[12] ^= 1
    assert checksum.device_checksum(b) != checksum.device_checksum(c)
    assert checksum.device_checksum(b[1:]) != checksum.device_checksum(b[:-1])
    assert checksum.device_checksum(b[1:]) == checksum.device_checksum(b[1:].clone())


def test_the_weights_keep_the_guarantee() -> None:
    """Odd ``a_k``, even non-zero ``c_k``, every pair distinct in a row: what the single-word guarantee rests on."""
    a, c = checksum.word_weights()
    assert len(a) == len(c) == checksum.ROW_BYTES // 4
    assert all(v % 2 == 1 and -127 <= v <= 127 for v in a)
    assert all(v % 2 == 0 and v != 0 and -128 <= v <= 127 for v in c)
    assert len(set(zip(a, c))) == len(a)


def test_the_comparison_counts_across_chunks_and_reports_the_worst(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(compare, "_CHUNK", 8)
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


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_gives_the_cpus_numbers() -> None:
    """The real sizes: whole 1 GiB blocks through cuBLAS's int8 product, an unaligned view copied block by block,
    and a tail; the CPU's exact integer arithmetic is the reference."""
    assert checksum.int8_product_works(torch.device("cuda"))  # the tensor cores take the blocks here
    gen = torch.Generator().manual_seed(4)
    for n in (13, 16 * 4096 + 4, 17 * 4096 + 1, (1 << 30) + 3 * 4096 + 7):
        host = torch.randint(0, 256, (n,), dtype=torch.uint8, generator=gen)
        dev = host.cuda()
        assert checksum.device_checksum(dev) == checksum.device_checksum(host), n
        assert checksum.device_checksum(dev[3:]) == checksum.device_checksum(host[3:]), n
        del dev
    x = torch.randn(1 << 20, device="cuda")
    y = x.clone()
    y[12345] = -y[12345]
    assert compare.fingerprint(x) != compare.fingerprint(y)
