"""Single-turn mode: a whole solution in one response, as files headed by their path.

Format (one block per file)::

    ### kernels/relu.cu
    ```cuda
    ...source...
    ```

The heading may use 1-6 ``#`` and may wrap the path in backticks. Fences are
three or more backticks or tildes; the closing fence matches the opening one.
"""

from __future__ import annotations

import re

_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+`?(?P<path>[^`\s]+)`?\s*$")
_FENCE = re.compile(r"^\s{0,3}(?P<fence>`{3,}|~{3,})(?P<info>.*)$")


def parse_solution_files(text: str) -> tuple[dict[str, str], list[str]]:
    """(path -> content, error messages) of the file blocks in ``text``."""
    lines = text.splitlines()
    files: dict[str, str] = {}
    errors: list[str] = []
    i = 0
    while i < len(lines):
        heading = _HEADING.match(lines[i])
        if not heading:
            i += 1
            continue
        path = heading.group("path")
        j = i + 1
        while j < len(lines) and not lines[j].strip():
            j += 1
        opening = _FENCE.match(lines[j]) if j < len(lines) else None
        if not opening:
            i += 1  # a heading that is not a file header (prose)
            continue
        fence = opening.group("fence")
        body: list[str] = []
        k = j + 1
        while k < len(lines) and not (lines[k].strip().startswith(fence[0] * len(fence)) and not lines[k].strip().strip(fence[0])):
            body.append(lines[k])
            k += 1
        if k >= len(lines):
            errors.append(f"file block for {path!r} is not closed with {fence}")
        if path in files:
            errors.append(f"file {path!r} appears twice; the last block wins")
        files[path] = "\n".join(body) + "\n"
        i = k + 1
    if not files and not errors:
        errors.append("no file blocks found; write each file as a line '### path/to/file' followed by a fenced code block")
    return files, errors
