"""The device-side checksum behind input and output fingerprints on CUDA: one read of the bytes.

A fingerprint is taken of every input after every call (T5) and of every output the trusted side may read (T10), so
on KernelBench's multi-GiB sets it is most of a call's cost beyond the forward itself. The checksum reads each byte
once, through the tensor cores:

1. **Rows.** The bytes are viewed as signed int8 rows of :data:`ROW_BYTES` (1024 words of 4 bytes). One int8 matrix
   product with a fixed weight matrix (``torch._int_mm``, exact int32 arithmetic) gives eight sums per row: for each
   byte lane ``b`` of the words, ``sum_k a_k * s[k, b]`` (lanes 0-3, odd weights ``a_k``) and ``sum_k c_k * s[k, b]``
   (lanes 4-7, even non-zero weights ``c_k``).
2. **Row values.** Per row, ``V = sum_b lane_b * 256**b`` and ``V' = sum_b lane'_b * 256**b``. Signed bytes are a
   balanced base-256 representation, so each word enters ``V`` as ``a_k`` times a bijective image of the word modulo
   2**32.
3. **Total.** ``V`` and ``V'`` modulo 2**32 times odd weights of the row's position, summed modulo 2**64; the bytes
   after the last whole row are added byte by byte with odd weights of their own.

So any single changed word (a flipped sign bit, a lowest mantissa bit) changes the total modulo 2**32 by the word's
change times ``w * a_k + w' * c_k``, an odd number: it cannot vanish. Swapped words and rows change it through their
weights. It is not a cryptographic hash; it does not need to be (``THREATS.md`` T5/T10: a candidate that could craft
a collision for the correct output has computed the correct output).

The result is a function of the bytes alone, whatever the tensor's alignment or device: a row block that is not
16-byte aligned for the matrix product is copied first, and rows too few for the product (or a platform whose int8
product fails or is inexact) are summed through float64 products, exact for these integers: the same numbers. So the runner's fingerprint of an offset view equals the trusted side's
fingerprint of the copy it received, and a CPU tensor's checksum equals its CUDA copy's.
"""

from __future__ import annotations

from typing import Any

#: Bytes per row of the first stage (a multiple of 4, so a word never straddles two rows).
ROW_BYTES = 4096
#: Rows per matrix product (1 GiB of bytes; its int32 row sums are 8 MiB).
BLOCK_ROWS = 1 << 18
#: Rows per aligned copy of a block that is not 16-byte aligned (64 MiB of bytes).
COPY_ROWS = 1 << 14
#: ``torch._int_mm`` takes no fewer rows than this on CUDA; smaller blocks are summed through float64 products.
MIN_MM_ROWS = 17
#: Rows per float64 product where the int8 one is not used (8 MiB of bytes; 64 MiB of float64).
FLOAT64_ROWS = 1 << 11

_MASK32 = 0xFFFFFFFF
_LANE_SCALE = (1, 1 << 8, 1 << 16, 1 << 24)

#: The int8 weight matrix of the first stage, per device (32 KiB, made once per process).
_WEIGHTS: dict[str, Any] = {}
#: Per device: whether the int8 product runs there and gives exact numbers (:func:`int8_product_works`).
_INT8_OK: dict[str, bool] = {}


def word_weights() -> tuple[list[int], list[int]]:
    """The per-word weights of one row: odd ``a_k`` in [-127, 127] and even non-zero ``c_k`` in [-128, 126], the
    pair ``(a_k, c_k)`` distinct for every word of the row (so two swapped words change the row's values)."""
    odd = [v for v in range(-127, 128) if v % 2]
    even = [v for v in range(-128, 127) if v % 2 == 0 and v]
    words = ROW_BYTES // 4
    # Odd weights cycle with period len(odd); each further cycle shifts its even partners by 37 places more.
    return ([odd[k % len(odd)] for k in range(words)],
            [even[(k + 37 * (k // len(odd))) % len(even)] for k in range(words)])


def weight_matrix(device: Any) -> Any:
    """The ``[ROW_BYTES, 8]`` int8 matrix: byte ``4k + b`` of a row weighs ``a_k`` in column ``b`` and ``c_k`` in
    column ``4 + b``, zero elsewhere."""
    import torch

    key = str(device)
    if key not in _WEIGHTS:
        a, c = word_weights()
        w = torch.zeros(ROW_BYTES // 4, 4, 8, dtype=torch.int8)
        for b in range(4):
            w[:, b, b] = torch.tensor(a, dtype=torch.int8)
            w[:, b, 4 + b] = torch.tensor(c, dtype=torch.int8)
        # column-major, as int8 linear layers hand their weight to torch._int_mm (``weight.t()``)
        _WEIGHTS[key] = w.reshape(ROW_BYTES, 8).t().contiguous().to(device).t()
    return _WEIGHTS[key]


def _lane_sums(rows: Any) -> Any:
    """``[r, 8]`` int32 lane sums of ``r`` rows of int8 (``[r, ROW_BYTES]``): the int8 product where it can take
    them, float64 products otherwise; both exact, so both give the same numbers."""
    import torch

    weights = weight_matrix(rows.device)
    if rows.shape[0] < MIN_MM_ROWS or not int8_product_works(rows.device):
        return _lane_sums_float64(rows, weights)
    if rows.data_ptr() % 16 == 0:
        return torch._int_mm(rows, weights)
    # cuBLAS wants 16-byte aligned operands: aligned copies of COPY_ROWS rows at a time (a copy changes no value),
    # their sums joined so that the rest of the block is summed once, as an aligned block is
    parts = []
    for s in range(0, rows.shape[0], COPY_ROWS):
        part = rows[s : s + COPY_ROWS]
        parts.append(torch._int_mm(part.clone(), weights) if part.shape[0] >= MIN_MM_ROWS
                     else _lane_sums_float64(part, weights))
    return torch.cat(parts)


def _lane_sums_float64(rows: Any, weights: Any) -> Any:
    """The same sums through float64 products, :data:`FLOAT64_ROWS` rows at a time: every partial sum is an integer
    far below 2**53, so each is exact."""
    import torch

    w = weights.to(torch.float64)
    parts = [(rows[s : s + FLOAT64_ROWS].to(torch.float64) @ w).to(torch.int32)
             for s in range(0, rows.shape[0], FLOAT64_ROWS)]
    return torch.cat(parts)


def int8_product_works(device: Any) -> bool:
    """Whether ``torch._int_mm`` runs on ``device`` and gives the float64 products' numbers (asked once per device
    and process). Where it does not (a platform without int8 GEMM), every block takes the float64 path: slower,
    the same checksum."""
    import torch

    key = str(device)
    if key not in _INT8_OK:
        rows = torch.arange(MIN_MM_ROWS * ROW_BYTES, device=device).remainder(251).sub(125).to(torch.int8)
        rows = rows.view(MIN_MM_ROWS, ROW_BYTES)
        weights = weight_matrix(device)
        try:
            ok = bool(torch.equal(torch._int_mm(rows, weights), _lane_sums_float64(rows, weights)))
            why = "its numbers differ from exact products"
        except RuntimeError as exc:
            ok, why = False, f"{type(exc).__name__}: {exc}"[:300]
        if not ok:
            import structlog

            structlog.get_logger(__name__).warning("fingerprints take the float64 path (slower, same numbers): "
                                                   "torch._int_mm is unusable here", device=key, why=why)
        _INT8_OK[key] = ok
    return _INT8_OK[key]


def _odd_positions(start: int, count: int, device: Any) -> Any:
    """Odd int64 weights of positions ``start .. start + count - 1``: ``(2 (i mod 65521) + 1) (2 (i div 65521) + 1)``
    (distinct within every 65521 positions, each block of them scaled by its own odd factor)."""
    import torch

    i = torch.arange(start, start + count, device=device, dtype=torch.int64)
    return (2 * (i % 65521) + 1) * (2 * (i // 65521) + 1)


def _rows_total(rows: Any, first_row: int) -> Any:
    """This block's share of the total (an int64 scalar on the device, modulo 2**64)."""
    import torch

    lanes = _lane_sums(rows).view(-1, 2, 4).to(torch.int64)
    scale = torch.tensor(_LANE_SCALE, dtype=torch.int64, device=rows.device)
    values = (lanes * scale).sum(-1) & _MASK32  # [r, 2]: V and V' of each row, modulo 2**32
    pos = _odd_positions(2 * first_row, 2 * rows.shape[0], rows.device).view(-1, 2)
    return (values * pos).sum(dtype=torch.int64)


def _tail_total(tail: Any, first_byte: int) -> Any:
    """The bytes after the last whole row, each (0..255) times an odd weight of its position."""
    import torch

    pos = _odd_positions(first_byte, tail.numel(), tail.device)
    return (tail.to(torch.int64) * pos).sum(dtype=torch.int64)


def device_checksum(raw: Any) -> int:
    """The 64-bit checksum of the bytes of ``raw`` (a flat uint8 tensor), computed where they live, with one device
    synchronisation (see the module's docstring for what it guarantees)."""
    import torch

    n = raw.numel()
    whole = n // ROW_BYTES
    signed = raw[: whole * ROW_BYTES].view(torch.int8).view(whole, ROW_BYTES)
    total = torch.zeros((), dtype=torch.int64, device=raw.device)
    for start in range(0, whole, BLOCK_ROWS):
        total += _rows_total(signed[start : start + BLOCK_ROWS], start)
    if whole * ROW_BYTES < n:
        total += _tail_total(raw[whole * ROW_BYTES :], whole * ROW_BYTES)
    return int(total.item()) & 0xFFFFFFFFFFFFFFFF
