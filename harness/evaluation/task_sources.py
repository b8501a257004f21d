"""Where evaluation tasks come from: KernelBench checkouts, JSONL/parquet, workdirs, folders, single files.

The ``data`` plugins (``plugins/data/kernelbench.py`` ...) are thin adapters
over these functions. Every task is a :class:`TaskManifest` built with
:meth:`TaskManifest.from_code` (stable id, level, source, code hash); shapes,
dtypes and domains are filled later by the harness probe
(``cuda_agent.harness.tasks``) when the runner prepares the task.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from cuda_agent.errors import ConfigError
from cuda_agent.schemas.task import TaskManifest

KERNELBENCH_LEVELS = (1, 2, 3, 4)
_LEVEL_COMMENT = re.compile(r"^#\s*level\s*[:=]\s*(\d+)\s*$", re.IGNORECASE | re.MULTILINE)


def parse_int_set(text: Any, what: str) -> set[int] | None:
    """``'1-10,15'`` (or an int) -> {1..10, 15}; None/'' -> None (everything)."""
    if text is None or text == "":
        return None
    if isinstance(text, int):
        return {text}
    out: set[int] = set()
    for part in str(text).split(","):
        part = part.strip()
        if not part:
            continue
        try:
            if "-" in part:
                lo, hi = (int(x) for x in part.split("-", 1))
                if hi < lo:
                    raise ValueError
                out.update(range(lo, hi + 1))
            else:
                out.add(int(part))
        except ValueError:
            raise ConfigError(f"{what}: {part!r} is not an integer or a range like '1-10' (in {text!r})") from None
    return out


def level_hint(code: str) -> int | None:
    """A ``# level: N`` comment line in a task file, if present."""
    m = _LEVEL_COMMENT.search(code)
    return int(m.group(1)) if m else None


def task_from_file(path: Path, task_id: str, *, level: int | None = None, source: str | None = None) -> TaskManifest:
    """A manifest of one KernelBench-format ``.py`` file (not probed)."""
    code = path.read_text(encoding="utf-8")
    return TaskManifest.from_code(
        task_id, code, name=path.stem, source=source or str(path), level=level if level is not None else level_hint(code)
    )


def kernelbench_root(target: Path) -> Path:
    """The ``KernelBench`` folder holding ``level<N>/``: the checkout root or that folder itself."""
    for cand in (target / "KernelBench", target):
        if any((cand / f"level{n}").is_dir() for n in KERNELBENCH_LEVELS):
            return cand
    raise ConfigError(
        f"{target} is not a KernelBench checkout: expected {target}/KernelBench/level1/*.py "
        "(or level folders directly inside it)"
    )


def _problem_number(stem: str) -> int | None:
    m = re.match(r"(\d+)_", stem)
    return int(m.group(1)) if m else None


def iter_kernelbench(target: Path, levels: Any = "1,2,3", ids: Any = None,
                     sizes: str = "full") -> Iterator[TaskManifest]:
    """Tasks of a KernelBench checkout, by level and problem number (``levels='1,2'``, ``ids='1-10'``); each records
    the checkout's commit and its file's hash; ``sizes='reduced'`` scales them down (not comparable to published)."""
    from cuda_agent.harness.kernelbench_tasks import kernelbench_task

    root = kernelbench_root(Path(target))
    wanted_levels = parse_int_set(levels, "kernelbench levels") or {1, 2, 3}
    bad = sorted(wanted_levels - set(KERNELBENCH_LEVELS))
    if bad:
        raise ConfigError(f"kernelbench levels {bad} do not exist; valid levels: 1, 2, 3, 4")
    if 4 in wanted_levels:
        raise ConfigError(
            "KernelBench level 4 builds Hugging Face models (from_pretrained) and needs model downloads; "
            "it cannot run offline. Use levels 1-3, or pre-download the models and pass them as a jsonl/folder source."
        )
    wanted_ids = parse_int_set(ids, "kernelbench ids")
    for level in sorted(wanted_levels):
        folder = root / f"level{level}"
        if not folder.is_dir():
            raise ConfigError(f"KernelBench checkout {root} has no level{level}/ folder")
        files = sorted(folder.glob("*.py"), key=lambda p: (_problem_number(p.stem) or 10**9, p.stem))
        for path in files:
            number = _problem_number(path.stem)
            if wanted_ids is not None and number not in wanted_ids:
                continue
            yield kernelbench_task(path, root, level, sizes)  # type: ignore[arg-type]


def iter_folder(target: Path, prefix: str | None = None, level: int | None = None) -> Iterator[TaskManifest]:
    """Every public ``*.py`` task file of a folder (sorted), id ``<prefix>/<stem>`` (prefix: the folder name)."""
    folder = Path(target)
    if not folder.is_dir():
        raise ConfigError(f"task folder {folder} does not exist or is not a folder")
    pre = prefix if prefix is not None else folder.name
    files = sorted(p for p in folder.glob("*.py") if not p.name.startswith("_"))
    if not files:
        raise ConfigError(f"task folder {folder} holds no *.py task files")
    for path in files:
        yield task_from_file(path, f"{pre}/{path.stem}" if pre else path.stem, level=level)


def iter_file(target: Path, task_id: str | None = None, level: int | None = None, probe: bool = False) -> Iterator[TaskManifest]:
    """One ``.py`` task file; id ``task_id`` or ``file/<stem>``; ``probe``: shapes, dtypes and domains filled."""
    path = Path(target)
    if not path.is_file() or path.suffix != ".py":
        raise ConfigError(f"task file {path} does not exist or is not a .py file")
    task = task_from_file(path, task_id or f"file/{path.stem}", level=level)
    if probe:
        from cuda_agent.harness.tasks import load_task_code

        probed = load_task_code(task.code, task.id, source=task.source, level=task.level)
        task = probed.model_copy(update={"meta": {**task.meta, **probed.meta}, "name": task.name,
                                          "upstream": task.upstream})
    yield task


def iter_workdir(target: Path, level: int | None = None) -> Iterator[TaskManifest]:
    """A CUDA-Agent-style workdir (``model.py`` inside), or a folder of such workdirs; id ``workdir/<name>``."""
    root = Path(target)
    if (root / "model.py").is_file():
        dirs = [root]
    else:
        dirs = sorted(d for d in root.iterdir() if (d / "model.py").is_file()) if root.is_dir() else []
    if not dirs:
        raise ConfigError(f"{root} is not a CUDA-Agent workdir: no model.py in it or in its sub-folders")
    for d in dirs:
        yield task_from_file(d / "model.py", f"workdir/{d.resolve().name}", level=level, source=f"workdir:{d}")


def _rows_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    with path.open(encoding="utf-8") as fh:
        for i, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ConfigError(f"{path}:{i}: not valid JSON: {exc}") from exc
            if not isinstance(row, dict):
                raise ConfigError(f"{path}:{i}: each line must be a JSON object, got {type(row).__name__}")
            yield row


def _rows_parquet(path: Path) -> Iterator[dict[str, Any]]:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise ConfigError(
            f"reading {path} needs pyarrow (pip install pyarrow); or convert the dataset to JSONL"
        ) from None
    yield from pq.read_table(path).to_pylist()


def iter_table(
    target: Path,
    *,
    code_field: str = "code",
    id_field: str = "id",
    level_field: str = "level",
    offset: int = 0,
    limit: int | None = None,
) -> Iterator[TaskManifest]:
    """Rows of a JSONL or parquet dataset with a code column; other columns go to ``meta``."""
    path = Path(target)
    if not path.is_file():
        raise ConfigError(f"dataset file {path} does not exist")
    rows = _rows_parquet(path) if path.suffix == ".parquet" else _rows_jsonl(path)
    seen: set[str] = set()
    emitted = 0
    for index, row in enumerate(rows):
        if index < offset:
            continue
        if limit is not None and emitted >= limit:
            break
        code = row.get(code_field)
        if not isinstance(code, str) or not code.strip():
            raise ConfigError(
                f"{path} row {index}: no code in column {code_field!r}; columns: {', '.join(sorted(row))} "
                f"(choose another with code_field=...)"
            )
        raw_id = row.get(id_field)
        task_id = f"{path.stem}/{raw_id if raw_id not in (None, '') else index}"
        if task_id in seen:
            raise ConfigError(f"{path} row {index}: duplicate task id {task_id!r} (column {id_field!r})")
        seen.add(task_id)
        level = row.get(level_field)
        meta = {k: v for k, v in row.items() if k not in (code_field, id_field, level_field)}
        yield TaskManifest.from_code(
            task_id, code, name=str(raw_id if raw_id not in (None, "") else index), source=f"{path}#{index}",
            level=int(level) if isinstance(level, (int, float, str)) and str(level).isdigit() else None,
            meta=json.loads(json.dumps(meta, default=str)),
        )
        emitted += 1
