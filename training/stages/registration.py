"""The ``register_stages`` hook implementation of a built-in stage, in one call (plugins/stages/*.py).

Each built-in stage plugin registers one name, one pydantic config model and
one driver class. The driver modules import torch, so the class is imported
when the stage is built, never when plugins are listed; this module imports
neither torch nor the drivers.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

from cuda_agent.hookspecs import hookimpl


def lazy_stage_factory(driver: str) -> Callable[[BaseModel], Any]:
    """``build(config)`` instantiating ``driver`` (``"package.module:Class"``), imported on the first call."""
    module_name, _, class_name = driver.partition(":")
    if not module_name or not class_name:
        raise ValueError(f"driver must be 'package.module:Class', got {driver!r}")

    def build(config: BaseModel) -> Any:
        return getattr(importlib.import_module(module_name), class_name)(config)

    build.__doc__ = f"Build the stage: ``{driver}(config)`` (imported here, not at plugin listing)."
    return build


def stage_plugin(name: str, driver: str, config_model: type[BaseModel], description: str) -> Callable[..., None]:
    """A ``register_stages`` hook implementation registering stage ``name``.

    Use it as the plugin module's ``register_stages``::

        register_stages = stage_plugin("rft", "cuda_agent.training.stages.rft:RFTStage", RFTStageConfig,
                                       "Stage 2, rejection fine-tuning.")

    :param name: the stage name used in ``stages[].name``.
    :param driver: ``"package.module:Class"`` of the driver, built with the validated config block.
    :param config_model: pydantic model validating ``stages[].config``.
    :param description: one line shown by ``cuda-agent plugins``.
    """
    build = lazy_stage_factory(driver)

    @hookimpl
    def register_stages(register: Callable[..., None]) -> None:
        register(name, build, config_model=config_model, description=description)

    register_stages.__doc__ = f"Register ``{name}``."
    return register_stages
