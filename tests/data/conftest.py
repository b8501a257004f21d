"""Shared, expensive artifacts of the data synthesis tests (built once per session)."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def mined(tmp_path_factory: pytest.TempPathFactory):
    """Real mining of torch + transformers (once): (torch report, transformers report, catalog path)."""
    from cuda_agent.training.synthesis.mine_torch import mine_torch
    from cuda_agent.training.synthesis.mine_transformers import mine_transformers
    from cuda_agent.training.synthesis.operators import write_catalog

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch_report = mine_torch()
        hf_report = mine_transformers()
    path = tmp_path_factory.mktemp("catalog") / "operators.jsonl"
    write_catalog(torch_report.specs + hf_report.specs, path)
    return torch_report, hf_report, path


@pytest.fixture(scope="session")
def catalog_path(mined) -> Path:
    """Path of the mined operator catalog (JSONL)."""
    return mined[2]


@pytest.fixture(scope="session")
def catalog(catalog_path: Path):
    """The mined catalog as OperatorSpec objects."""
    from cuda_agent.training.synthesis.operators import read_catalog

    return read_catalog(catalog_path)


@pytest.fixture(scope="session")
def probe_worker():
    """One CPU probe worker shared by the filter tests (torch imported once; torch.compile with the
    cheap 'eager' backend: Dynamo capture without AOT/codegen)."""
    from cuda_agent.training.synthesis.execution_probe import ProbeSettings, ProbeWorker

    settings = ProbeSettings(device="cpu", timeout_s=300,  # generous: only the hang test relies on a timeout (its own worker)
                             compile_backend="eager", warmup=1, min_repeats=3,
                             max_repeats=5, timing_budget_s=0.02, memory_cap_mb=6000)
    worker = ProbeWorker(settings)
    worker.start()
    yield worker
    worker.close()


def _run_task_code(code: str):  # type: ignore[no-untyped-def]
    """Execute a KernelBench-format task module and return its reference output (seed 0, no grad)."""
    import torch

    ns: dict = {}
    exec(compile(code, "<task>", "exec"), ns)  # noqa: S102 - our own generated tasks
    torch.manual_seed(0)
    model = ns["Model"](*ns["get_init_inputs"]())
    with torch.no_grad():
        return model(*ns["get_inputs"]())


@pytest.fixture(scope="session")
def run_task_code():  # type: ignore[no-untyped-def]
    """``run(code) -> output``: execute a task module's reference forward once."""
    return _run_task_code
