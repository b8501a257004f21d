"""Which task each solution of ``cuda-agent score`` is graded against.

A folder of task files (``TASKS/<name>.py`` for ``SOLUTIONS/<name>``), or a KernelBench checkout
(``kernelbench:KB``) for a KernelBench run folder, each solution mapped by level and problem id
(:mod:`~cuda_agent.harness.score_kernelbench`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


class TaskResolver:
    """The solutions to score and the task of each: a folder of task files, or a KernelBench checkout."""

    def __init__(self, solutions: Path, tasks: Path | str) -> None:
        from cuda_agent.harness import score_kernelbench as kb

        self.kernelbench = kb.is_kernelbench_spec(tasks)
        self.unmapped: list[tuple[str, str]] = []
        if self.kernelbench:
            self.index = kb.problem_index(str(tasks))
            mapped, unmapped = kb.map_solutions(solutions, self.index)
            self.mapped = {m.name: m for m in mapped}
            self.entries = [(m.name, m.path) for m in mapped]
            self.unmapped = unmapped
        else:
            self.folder = Path(tasks)
            from cuda_agent.harness.score_cli import discover

            self.entries = discover(solutions)

    def task(self, name: str) -> tuple[Any, dict[str, Any]]:
        """(probed manifest, extra row fields) of solution ``name``; raises ValueError when there is none."""
        from cuda_agent.harness.tasks import load_task_code, load_task_file

        if not self.kernelbench:
            task_file = self.folder / f"{name}.py"
            if not task_file.is_file():
                raise ValueError(f"no task file {task_file} for solution {name}")
            return load_task_file(task_file, id=f"tasks/{name}"), {}
        m = self.mapped[name]
        task = self.index[(m.level, m.problem)]
        probed = load_task_code(task.code, task.id, source=task.source, level=task.level)
        probed = probed.model_copy(update={"meta": {**task.meta, **probed.meta}, "name": task.name,
                                           "upstream": task.upstream})
        extra = self.kernelbench_fields(name)
        if task.meta.get("sizes") == "reduced":
            extra["flags_extra"] = ["reduced_sizes_not_comparable_to_published"]
        return probed, extra


    def kernelbench_fields(self, name: str) -> dict[str, Any]:
        """The ``problem`` and ``kernelbench`` fields of a KernelBench solution's row (commit, file hash, sample)."""
        if not self.kernelbench or name not in self.mapped:
            return {}
        from cuda_agent.harness.score_kernelbench import provenance

        m = self.mapped[name]
        task = self.index[(m.level, m.problem)]
        return {"problem": task.id, "kernelbench": {**provenance(task), "level": m.level, "problem": m.problem,
                                                    "sample": m.sample}}
