"""Draw the pictures of docs/architecture.md: the component map and the sequence of one ``verify`` call.

Usage: ``python scripts/architecture_diagrams.py`` (writes ``docs/architecture-components.svg`` and
``docs/architecture-verify.svg``; plain SVG, no dependencies). The same content as text (mermaid) is in
docs/architecture.md; edit both when the architecture changes.
"""

from __future__ import annotations

import sys
from pathlib import Path
from xml.sax.saxutils import escape

DOCS = Path(__file__).resolve().parents[1] / "docs"
FONT = "font-family='DejaVu Sans, Helvetica, Arial, sans-serif'"
#: Fill colours by role: the untrusted side stands out.
FILL = {"core": "#e8eef8", "plugin": "#eaf5e9", "harness": "#fff6e0", "part": "#fdebc8", "trusted": "#f6dcb4",
        "sandbox": "#f8d7d7", "record": "#ede4f6", "group": "none"}

# ---------------------------------------------------------------------------- component map
#: id -> (label lines, x, y, width, height, role)
BOXES: dict[str, tuple[list[str], int, int, int, int, str]] = {
    "cli": (["CLI", "cuda-agent run / eval / score"], 20, 20, 200, 50, "core"),
    "config": (["config", "YAML + -o overrides (pydantic)"], 250, 20, 210, 50, "core"),
    "pm": (["plugin manager / registry", "pluggy hooks, register_*"], 490, 20, 230, 50, "core"),
    "episode": (["episode", "ReAct loop (core/loop.py)"], 20, 110, 200, 50, "core"),
    "tools": (["tools", "compile / verify / profile"], 250, 110, 210, 50, "plugin"),
    "backend": (["backend", "cpu / cuda (plugins/backends)"], 490, 110, 230, 50, "plugin"),
    "grade": (["trusted final grading", "fresh seeds, default", "integrity, ABAB timing"], 20, 290, 200, 62, "record"),
    "result": (["CandidateResult", "status, rule, timing,", "diagnostics"], 20, 400, 200, 62, "record"),
    "reward": (["reward plugin", "milestone / speedup"], 20, 510, 200, 50, "plugin"),
    "harness": (["harness (trusted side)"], 240, 190, 940, 445, "group"),
    "refpool": (["reference pool", "warm, spares, LRU, retire"], 260, 230, 200, 50, "part"),
    "evaluator": (["Evaluator (facade)", "verify / profile / grade"], 480, 230, 220, 50, "harness"),
    "runpool": (["candidate pool", "runners started ahead"], 720, 230, 200, 50, "part"),
    "build": (["build", "ninja, sandboxed compiler"], 960, 230, 200, 50, "harness"),
    "strategies": (["strategies", "phases.py, grading.py"], 260, 315, 200, 50, "part"),
    "session": (["session", "open, call, check"], 480, 315, 220, 50, "part"),
    "timed": (["timed run", "rotation, spot checks, fresh sets"], 720, 315, 200, 50, "part"),
    "integrity": (["integrity", "source + binary rules"], 960, 315, 200, 50, "harness"),
    "sanitizer": (["sanitizer gate", "compute-sanitizer (verify)"], 260, 395, 200, 45, "part"),
    "sets": (["set store", "index -> seed, state"], 480, 395, 220, 45, "part"),
    "transport": (["transport", "ipc / vmm / host, memfd"], 720, 395, 200, 45, "part"),
    "lock": (["timing lock", "one timed batch per GPU"], 960, 395, 200, 45, "harness"),
    "wire": (["typed clients (reference_client.py, runner_client.py), one wire format: JSON lines + descriptors"],
             260, 470, 900, 34, "harness"),
    "runner": (["candidate runner (sandboxed: bubblewrap)", "loads model_new.py + cuda_extension,",
                "times calls, runtime guard"], 260, 535, 430, 80, "sandbox"),
    "reference": (["reference process (trusted)", "sets from secret seeds, expected outputs,",
                   "comparison, baselines"], 720, 535, 440, 80, "trusted"),
}
#: (from, to, label, waypoints): waypoints route an arrow around boxes.
ARROWS: list[tuple[str, str, str, list[tuple[int, int]]]] = [
    ("cli", "config", "", []), ("config", "pm", "", []), ("pm", "backend", "builds", []), ("cli", "episode", "", []),
    ("episode", "tools", "tool calls", []), ("tools", "backend", "", []),
    ("backend", "evaluator", "verify / profile / grade", []), ("backend", "build", "", []),
    ("build", "integrity", "", []), ("evaluator", "refpool", "", []), ("evaluator", "runpool", "", []),
    ("evaluator", "strategies", "", []), ("strategies", "session", "", []), ("timed", "session", "", []),
    ("session", "sets", "", []), ("timed", "transport", "", []), ("timed", "lock", "", []),
    ("strategies", "sanitizer", "", []), ("wire", "runner", "", []), ("wire", "reference", "", []),
    ("episode", "grade", "selected state", []), ("grade", "backend", "backend.grade",
                                                  [(232, 321), (232, 176), (560, 176)]),
    ("grade", "result", "", []), ("result", "reward", "", []),
]


def _text(x: float, y: float, lines: list[str], size: int = 12, bold_first: bool = True) -> str:
    out = []
    for i, line in enumerate(lines):
        weight = "bold" if i == 0 and bold_first else "normal"
        out.append(f"<text x='{x}' y='{y + i * (size + 3)}' {FONT} font-size='{size if i == 0 else size - 1}' "
                   f"font-weight='{weight}' text-anchor='middle'>{escape(line)}</text>")
    return "\n".join(out)


def _anchor(box: tuple, toward: tuple) -> tuple[float, float]:
    """The point on ``box``'s border facing ``toward``'s centre."""
    _, x, y, w, h, _ = box
    _, tx, ty, tw, th, _ = toward
    cx, cy, ox, oy = x + w / 2, y + h / 2, tx + tw / 2, ty + th / 2
    dx, dy = ox - cx, oy - cy
    if dx == 0 and dy == 0:
        return cx, cy
    scale = min((w / 2) / abs(dx) if dx else float("inf"), (h / 2) / abs(dy) if dy else float("inf"))
    return cx + dx * scale, cy + dy * scale


def components_svg() -> str:
    """The component map."""
    parts = ["<svg xmlns='http://www.w3.org/2000/svg' width='1190' height='680' viewBox='0 0 1190 680'>",
             "<defs><marker id='a' markerWidth='8' markerHeight='8' refX='7' refY='3' orient='auto'>"
             "<path d='M0,0 L7,3 L0,6 z' fill='#555'/></marker></defs>",
             "<rect width='1190' height='680' fill='white'/>"]
    for name, (lines, x, y, w, h, role) in BOXES.items():
        if role == "group":
            parts.append(f"<rect x='{x}' y='{y}' width='{w}' height='{h}' rx='10' fill='#fffcf3' stroke='#c9a64a' "
                         "stroke-dasharray='6,4'/>")
            parts.append(f"<text x='{x + 12}' y='{y + 18}' {FONT} font-size='13' font-weight='bold' "
                         f"fill='#8a6d1d'>{escape(lines[0])}</text>")
            continue
        parts.append(f"<rect x='{x}' y='{y}' width='{w}' height='{h}' rx='6' fill='{FILL[role]}' stroke='#555'/>")
        parts.append(_text(x + w / 2, y + 18 if len(lines) > 1 else y + h / 2 + 4, lines))
    for a, b, label, via in ARROWS:
        if via:  # out of the box's side, along the waypoints, into the target's nearest side
            _, bx, by, bw, bh, _ = BOXES[b]
            last = via[-1]
            end = (last[0], by + bh) if last[1] > by + bh else (last[0], by)
            _, ax, ay, aw, ah, _ = BOXES[a]
            start = (ax + aw, via[0][1])
            points = [start, *via, end]
        else:
            points = [_anchor(BOXES[a], BOXES[b]), _anchor(BOXES[b], BOXES[a])]
        path = " ".join(f"{x:.0f},{y:.0f}" for x, y in points)
        parts.append(f"<polyline points='{path}' fill='none' stroke='#555' marker-end='url(#a)'/>")
        if label:
            (x1, y1), (x2, y2) = (points[2], points[3]) if via else (points[0], points[1])
            parts.append(f"<text x='{(x1 + x2) / 2 + 4:.0f}' y='{(y1 + y2) / 2 - 4:.0f}' {FONT} font-size='10' "
                         f"fill='#333'>{escape(label)}</text>")
    legend = [("core", "core/"), ("plugin", "plugins/"), ("harness", "harness/"), ("part", "evaluator parts"),
              ("trusted", "trusted child process"), ("sandbox", "candidate (untrusted)"),
              ("record", "records and grading")]
    for i, (role, label) in enumerate(legend):
        x = 20 + i * 168
        parts.append(f"<rect x='{x}' y='652' width='12' height='12' fill='{FILL[role]}' stroke='#555'/>")
        parts.append(f"<text x='{x + 16}' y='662' {FONT} font-size='10'>{escape(label)}</text>")
    parts.append("</svg>")
    return "\n".join(parts)


# ---------------------------------------------------------------------------- sequence of one verify
LANES = [("Evaluator (parent, trusted)", 170), ("reference process (trusted)", 520), ("candidate runner (sandboxed)", 850)]
#: (from lane, to lane, label); from == to: a note on that lane. A label starting with '~' is a reply (dashed).
STEPS: list[tuple[int, int, str]] = [
    (0, 1, "acquire: start {task, timer} (a warm one is reused)"), (1, 0, "~started {init_inputs}"),
    (0, 2, "acquire a runner started ahead: setup {device, timer}"), (2, 0, "~ready {pid, spin}"),
    (0, 1, "make_set {k, secret seed, stage=false} x N"), (1, 0, "~made_set {layout, fingerprints, outputs}"),
    (0, 2, "load {workspace, task code, seeded_sets}"),
    (2, 2, "makes sets from seeds, drops the task code, imports the candidate"),
    (2, 0, "~loaded {guard violations, seeded fingerprints}"),
    (0, 2, "inputs {k} for any set whose fingerprints differ"),
    (0, 2, "call {k, audit on the first}"), (2, 0, "~called {ms, output metas, input fingerprints}"),
    (0, 0, "wall clock covers ms (T8); metas: type, dtype, shape, aliasing"),
    (0, 2, "export {transport}"), (2, 0, "~exported {descriptions} (+ device buffers by descriptor)"),
    (0, 0, "freeze the runner's process tree"),
    (0, 1, "check {k, outputs, metas, tolerances} (+ descriptors)"), (1, 0, "~verdict {errors, violations}"),
    (0, 0, "thaw; the next set; the first set again (determinism)"),
    (0, 2, "guard"), (2, 0, "~guarded {violations}"), (0, 1, "inputs_intact"), (1, 0, "~intact {changed}"),
    (0, 0, "kill the runner; fold findings into a CandidateResult"), (0, 1, "drop_sets"), (1, 0, "~dropped {pinned bytes}"),
]


def verify_svg() -> str:
    """The sequence of one verify call across the three processes."""
    top, step = 70, 27
    height = top + step * len(STEPS) + 40
    parts = [f"<svg xmlns='http://www.w3.org/2000/svg' width='1020' height='{height}' viewBox='0 0 1020 {height}'>",
             "<defs><marker id='a' markerWidth='8' markerHeight='8' refX='7' refY='3' orient='auto'>"
             "<path d='M0,0 L7,3 L0,6 z' fill='#333'/></marker></defs>",
             f"<rect width='1020' height='{height}' fill='white'/>"]
    for i, (name, x) in enumerate(LANES):
        role = ("harness", "trusted", "sandbox")[i]
        parts.append(f"<rect x='{x - 120}' y='15' width='240' height='34' rx='6' fill='{FILL[role]}' stroke='#555'/>")
        parts.append(_text(x, 37, [name]))
        parts.append(f"<line x1='{x}' y1='49' x2='{x}' y2='{height - 15}' stroke='#999' stroke-dasharray='4,4'/>")
    for i, (a, b, label) in enumerate(STEPS):
        y = top + i * step
        reply = label.startswith("~")
        label = label.lstrip("~")
        xa, xb = LANES[a][1], LANES[b][1]
        if a == b:  # a note, right of its lane (left of the last one)
            width = 12 + 6.3 * len(label)
            left = xa - 8 if a < len(LANES) - 1 else xa + 8 - width
            parts.append(f"<rect x='{left:.0f}' y='{y - 13}' width='{width:.0f}' height='18' fill='#f4f4f4' "
                         "stroke='#bbb'/>")
            parts.append(f"<text x='{left + 6:.0f}' y='{y}' {FONT} font-size='11' font-style='italic'>"
                         f"{escape(label)}</text>")
            continue
        dash = " stroke-dasharray='5,3'" if reply else ""
        parts.append(f"<line x1='{xa}' y1='{y}' x2='{xb}' y2='{y}' stroke='#333'{dash} marker-end='url(#a)'/>")
        parts.append(f"<text x='{(xa + xb) / 2}' y='{y - 4}' {FONT} font-size='11' text-anchor='middle'>"
                     f"{escape(label)}</text>")
    parts.append("</svg>")
    return "\n".join(parts)


def main() -> int:
    """Write both pictures."""
    (DOCS / "architecture-components.svg").write_text(components_svg() + "\n")
    (DOCS / "architecture-verify.svg").write_text(verify_svg() + "\n")
    print(f"wrote {DOCS / 'architecture-components.svg'} and {DOCS / 'architecture-verify.svg'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
