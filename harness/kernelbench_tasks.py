"""KernelBench problems as task manifests: upstream commit and file hash on each, reduced sizes on request.

The ``kernelbench`` task source (:func:`cuda_agent.harness.evaluation.task_sources.iter_kernelbench`) builds
each problem here. Every manifest records where its file came from (:class:`UpstreamSource`: the repository,
the checkout's commit, the path, the sha256 of the file's bytes), so every result on a KernelBench problem
names them. The commit is read from the checkout: ``COMMIT`` (written by ``scripts/fetch_kernelbench.sh``
and beside the vendored test problems) or ``git rev-parse HEAD`` of a git checkout; the pinned commit is in
``scripts/kernelbench.lock``.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
from functools import lru_cache
from pathlib import Path
from typing import Literal

from cuda_agent.schemas.task import TaskManifest, UpstreamSource

REPOSITORY = "ScalingIntelligence/KernelBench"
#: KernelBench's run-folder file names: ``level_{L}_problem_{P}_sample_{S}_kernel.py``.
RUN_FILE = re.compile(r"^level_(\d+)_problem_(\d+)_sample_(\d+)_kernel\.py$")


@lru_cache(maxsize=32)
def checkout_commit(root: Path) -> str | None:
    """The commit of a KernelBench checkout (``root`` holds ``KernelBench/`` or is it); None when unknown."""
    for folder in (root, root.parent):
        marker = folder / "COMMIT"
        if marker.is_file():
            text = marker.read_text().strip()
            if re.fullmatch(r"[0-9a-f]{40}", text):
                return text
        if (folder / ".git").exists():
            proc = subprocess.run(["git", "-C", str(folder), "rev-parse", "HEAD"], capture_output=True, text=True,
                                  timeout=30, check=False)
            if proc.returncode == 0 and re.fullmatch(r"[0-9a-f]{40}", proc.stdout.strip()):
                return proc.stdout.strip()
    return None


def problem_number(stem: str) -> int | None:
    """KernelBench's problem id: the number before the first underscore of the file stem (``19_ReLU`` -> 19)."""
    m = re.match(r"(\d+)_", stem)
    return int(m.group(1)) if m else None


def kernelbench_task(path: Path, root: Path, level: int, sizes: Literal["full", "reduced"] = "full") -> TaskManifest:
    """The manifest of one problem file of the checkout ``root`` (the ``KernelBench`` folder).

    ``sizes='reduced'`` rewrites its sizes (:mod:`~cuda_agent.harness.kernelbench_sizes`); the manifest then
    says that its results are not comparable to published numbers.
    """
    raw = path.read_bytes()
    code = raw.decode("utf-8")
    upstream = UpstreamSource(repository=REPOSITORY, commit=checkout_commit(root), path=f"KernelBench/level{level}/"
                              f"{path.name}", file_sha256=hashlib.sha256(raw).hexdigest())
    # Also in meta, which every probe and copy of the manifest keeps.
    meta: dict = {"kernelbench": {"level": level, "problem": problem_number(path.stem), "commit": upstream.commit,
                                  "file_sha256": upstream.file_sha256}}
    task_id = f"kernelbench/level{level}/{path.stem}"
    if sizes == "reduced":
        from cuda_agent.harness.kernelbench_sizes import reduced_code, reduction_meta

        code, plan = reduced_code(code, str(path), keep_spatial=level == 3)
        meta.update(reduction_meta(plan))
    elif sizes != "full":
        from cuda_agent.errors import ConfigError

        raise ConfigError(f"kernelbench sizes={sizes!r} is not valid; valid: full, reduced")
    return TaskManifest.from_code(task_id, code, name=path.stem, source=f"kernelbench:{root}/level{level}/{path.name}",
                                  level=level, meta=meta, upstream=upstream)
