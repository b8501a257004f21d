"""Settings of one benchmark run: the public harness block and the experiment-only knobs, from ``-o`` overrides.

Benchmarks take ``-o harness.<block>.<key>=VALUE`` (the public settings, as in a run config's
``plugins.<backend>.harness`` block, e.g. ``-o harness.verify.input_sets=3``) and ``-o experiments.<key>=VALUE``
(:class:`~cuda_agent.harness.ExperimentSettings`, e.g. ``-o experiments.timing.net_overhead=true`` or
``-o experiments.spare_references=0``), parsed by the run config's own override parser
(:func:`cuda_agent.config.load_config`): values are YAML, unknown keys fail with the valid ones listed.
"""

from __future__ import annotations

import argparse
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from cuda_agent.config import load_config
from cuda_agent.harness import ExperimentSettings, HarnessSettings


class BenchmarkSettings(BaseModel):
    """What a benchmark's evaluations run with."""

    model_config = ConfigDict(extra="forbid")

    harness: HarnessSettings = Field(default_factory=HarnessSettings, description="The public harness settings.")
    experiments: ExperimentSettings = Field(default_factory=ExperimentSettings, description="Experiment-only knobs.")


def add_settings_argument(parser: argparse.ArgumentParser) -> None:
    """``-o KEY=VALUE`` (repeatable) on ``parser``."""
    parser.add_argument("-o", "--set", dest="settings", action="append", default=[], metavar="KEY=VALUE",
                        help="harness.<block>.<key>=VALUE (public settings, e.g. harness.verify.input_sets=3) or "
                        "experiments.<key>=VALUE (e.g. experiments.timing.net_overhead=true, "
                        "experiments.spare_references=0); repeatable; values are YAML.")


def load_settings(overrides: list[str], parser: argparse.ArgumentParser | None = None) -> BenchmarkSettings:
    """The settings ``overrides`` give (a parser's error on a bad one when ``parser`` is given)."""
    try:
        return load_config(BenchmarkSettings, overrides=overrides)
    except Exception as exc:  # noqa: BLE001 - ConfigError, reported as a usage error
        if parser is None:
            raise
        parser.error(f"-o: {exc}")
        raise  # unreachable: parser.error exits


def make_backend(kind: str, settings: BenchmarkSettings, **config: Any) -> Any:
    """The ``kind`` backend ('cpu'/'cuda') with ``settings`` (its evaluator takes the experiments)."""
    from cuda_agent.plugins.backends._common import KernelBackendConfig

    cfg = KernelBackendConfig(harness=settings.harness, **config)
    if kind == "cpu":
        from cuda_agent.plugins.backends.cpu import CpuBackend

        backend: Any = CpuBackend(cfg)
    else:
        from cuda_agent.plugins.backends.cuda import CudaBackend

        backend = CudaBackend(cfg)
    backend.experiments = settings.experiments
    return backend
