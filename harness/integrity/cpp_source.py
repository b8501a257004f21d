"""C/C++/CUDA source preparation for the source rules: comments and strings out, macros expanded.

Rules must not match inside comments or string literals (false rejections),
and must see through ``#define`` aliases and ``##`` token pasting (false
passes). ``strip_code`` blanks comments and literal contents while keeping
every newline, so line numbers survive; ``expand_macros`` runs the real C
preprocessor over the stripped text with every ``#include`` removed and the
workspace's own ``#define``s prepended, so user macros expand exactly as the
compiler would expand them, in milliseconds.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass, field

_INCLUDE_RE = re.compile(r'^\s*#\s*include(?:_next)?\s*[<"]([^>"]+)[>"]', re.MULTILINE)
_DIRECTIVE_RE = re.compile(r"^\s*#\s*(define|undef)\b", re.MULTILINE)
_LINE_MARKER_RE = re.compile(r'^#\s*(\d+)\s+"([^"]*)"')


@dataclass
class StrippedSource:
    """A source file with comments/strings blanked, plus what was inside the literals."""

    code: str
    strings: list[tuple[int, str]] = field(default_factory=list)  # (line, literal text)
    includes: list[tuple[int, str]] = field(default_factory=list)  # (line, included path)


def strip_code(text: str) -> StrippedSource:
    """Blank comments and the contents of string/char literals (raw strings too), keeping newlines."""
    out: list[str] = []
    strings: list[tuple[int, str]] = []
    i, n, line = 0, len(text), 1
    while i < n:
        c = text[i]
        nxt = text[i + 1] if i + 1 < n else ""
        if c == "/" and nxt == "/":
            j = i
            while True:
                k = text.find("\n", j)
                if k < 0:
                    j = n
                    break
                if text[k - 1] == "\\":  # a line comment continues over backslash-newline
                    out.append("\n")
                    line += 1
                    j = k + 1
                    continue
                j = k
                break
            i = j
            continue
        if c == "/" and nxt == "*":
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            chunk = text[i:j]
            line += chunk.count("\n")
            out.append(" " + "\n" * chunk.count("\n"))
            i = j
            continue
        raw = re.match(r'(?:u8|u|U|L)?R"([^()\\ ]{0,16})\(', text[i:i + 24]) if c in "uULR" else None
        if raw and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            delim = ")" + raw.group(1) + '"'
            start = i + raw.end()
            j = text.find(delim, start)
            j = n if j < 0 else j
            body = text[start:j]
            strings.append((line, body))
            line += body.count("\n")
            out.append('""' + "\n" * body.count("\n"))
            i = min(n, j + len(delim))
            continue
        if c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            body = text[i + 1:min(j, n)]
            if c == '"':
                strings.append((line, body))
            out.append(c + c)
            i = j + 1
            continue
        if c == "\n":
            line += 1
        out.append(c)
        i += 1
    code = "".join(out)
    includes = [(text[: m.start()].count("\n") + 1, m.group(1)) for m in _INCLUDE_RE.finditer(text)]
    return StrippedSource(code=code, strings=strings, includes=includes)


def join_continuations(code: str) -> str:
    """Replace backslash-newline by a space + newline at the end of the logical line, keeping line count."""
    lines = code.split("\n")
    out: list[str] = []
    pending: list[str] = []
    for ln in lines:
        if ln.rstrip().endswith("\\"):
            pending.append(ln.rstrip()[:-1])
            continue
        if pending:
            out.append(" ".join(pending + [ln]))
            out.extend([""] * len(pending))
            pending = []
        else:
            out.append(ln)
    if pending:
        out.append(" ".join(pending))
        out.extend([""] * (len(pending) - 1))
    return "\n".join(out)


def macro_definitions(code: str) -> str:
    """The ``#define``/``#undef`` directives of already-stripped code, continuations kept."""
    joined = join_continuations(code)
    return "\n".join(ln for ln in joined.split("\n") if _DIRECTIVE_RE.match(ln))


@dataclass
class ExpandedSource:
    """Preprocessor output mapped back to the lines of the original file."""

    ok: bool
    lines: list[tuple[int, str]]  # (original line, expanded text)
    error: str = ""


def expand_macros(code: str, filename: str, extra_defines: str = "", *, timeout_s: float = 20.0) -> ExpandedSource:
    """Expand user macros in stripped ``code`` with the system preprocessor (includes removed).

    :param code: output of ``strip_code(...).code``.
    :param filename: name for line markers.
    :param extra_defines: ``#define`` lines of the workspace's other files (its headers).
    """
    cpp = shutil.which("g++") or shutil.which("clang++") or shutil.which("cpp")
    if cpp is None:
        return ExpandedSource(ok=False, lines=[], error="no C preprocessor (g++/clang++/cpp) on PATH")
    body_lines = []
    for ln in code.split("\n"):
        stripped = ln.lstrip()
        if stripped.startswith("#") and re.match(r"#\s*(include|include_next|error|warning|import)\b", stripped):
            body_lines.append("")
        else:
            body_lines.append(ln)
    text = extra_defines + "\n" + f'#line 1 "{filename}"\n' + "\n".join(body_lines) + "\n"
    args = [cpp, "-E", "-x", "c++", "-w", "-D__CUDACC__", "-D__NVCC__", "-D__CUDA_ARCH__=900", "-"]
    if cpp.endswith("cpp"):
        args = [cpp, "-w", "-D__CUDACC__", "-D__NVCC__", "-D__CUDA_ARCH__=900", "-"]
    try:
        proc = subprocess.run(args, input=text, capture_output=True, text=True, timeout=timeout_s, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return ExpandedSource(ok=False, lines=[], error=str(exc))
    if proc.returncode != 0:
        return ExpandedSource(ok=False, lines=[], error=proc.stderr.strip()[-400:])
    lines: list[tuple[int, str]] = []
    current_file, current_line = "", 1
    for out_line in proc.stdout.split("\n"):
        marker = _LINE_MARKER_RE.match(out_line)
        if marker:
            current_line, current_file = int(marker.group(1)), marker.group(2)
            continue
        if current_file == filename and out_line.strip():
            lines.append((current_line, out_line))
        current_line += 1
    return ExpandedSource(ok=True, lines=lines)
