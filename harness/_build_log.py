"""Trimming compiler output to what the agent can act on: the first errors, located.

gcc/clang print ``file:line:col: error: message``; nvcc prints
``file(line): error: message``; the linker prints ``undefined reference``.
We keep the first few errors with a little context, rewrite absolute paths
relative to the workspace, and cap the length.
"""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import BaseModel, Field

_GCC = re.compile(r"^(?P<file>[^\s:][^:]*):(?P<line>\d+):(?:(?P<col>\d+):)?\s*(?:fatal )?error:\s*(?P<msg>.*)$")
_NVCC = re.compile(r"^(?P<file>[^\s(][^(]*)\((?P<line>\d+)\):\s*(?:catastrophic )?error:?\s*(?P<msg>.*)$")
_LINK = re.compile(r"(undefined reference to|multiple definition of|cannot find -l)(?P<msg>.*)$")
_NOISE = re.compile(r"^(ninja: build stopped|ninja: Entering|\[\d+/\d+\] |FAILED: |compilation terminated)")


class BuildError(BaseModel):
    """One located compiler or linker error."""

    file: str | None = Field(None, description="Source file, relative to the workspace when inside it.")
    line: int | None = Field(None, description="1-based line number, when the tool gave one.")
    message: str = Field(description="The compiler's message.")


def relativize(text: str, workspace_root: Path, build_dir: Path) -> str:
    """Replace absolute workspace/build paths by relative ones (the agent sees its own paths)."""
    for root, label in ((Path(workspace_root), ""), (Path(build_dir), "<build>/")):
        for variant in {str(root), str(root.resolve())}:
            text = text.replace(variant.rstrip("/") + "/", label)
    return text


def parse_errors(text: str) -> list[BuildError]:
    """Every error line found in compiler/linker output, in order."""
    errors: list[BuildError] = []
    for raw in text.splitlines():
        line = raw.strip()
        m = _GCC.match(line) or _NVCC.match(line)
        if m:
            errors.append(BuildError(file=m.group("file"), line=int(m.group("line")), message=m.group("msg").strip()))
            continue
        m = _LINK.search(line)
        if m:
            errors.append(BuildError(message=line))
    return errors


def trim_log(text: str, *, max_errors: int = 5, context: int = 6, limit: int = 3000) -> str:
    """The first ``max_errors`` errors, each with ``context`` following lines; else the tail.

    Lines are the compiler's own (notes, caret lines) so the agent sees the
    exact location; ninja's bookkeeping lines are dropped.
    """
    lines = [ln for ln in text.splitlines() if not _NOISE.match(ln.strip())]
    picked: list[str] = []
    seen = 0
    i = 0
    while i < len(lines) and seen < max_errors:
        ln = lines[i].strip()
        if _GCC.match(ln) or _NVCC.match(ln) or _LINK.search(ln):
            seen += 1
            block = lines[i : i + 1 + context]
            # Stop the context at the next error so it is not shown twice.
            for k, extra in enumerate(block[1:], start=1):
                s = extra.strip()
                if _GCC.match(s) or _NVCC.match(s) or _LINK.search(s):
                    block = block[:k]
                    break
            picked.extend(block)
            i += len(block)
            continue
        i += 1
    if not picked:
        picked = lines[-40:]
    total = len(parse_errors(text))
    if total > seen:
        picked.append(f"[... {total - seen} more errors not shown ...]")
    out = "\n".join(picked).strip()
    if len(out) > limit:
        out = out[: limit - 40].rstrip() + "\n[... log truncated by harness ...]"
    return out
