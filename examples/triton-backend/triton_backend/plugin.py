"""The plugin module of triton-backend (entry point ``triton``): the backend ``triton`` and its skill."""

from __future__ import annotations

from importlib import resources
from typing import Any

from cuda_agent.hookspecs import hookimpl

from triton_backend.adapter import TritonBackend, TritonConfig

#: The hookspec version this plugin was written for (cuda-agent refuses another major or a newer minor).
CUDA_AGENT_HOOKSPEC_VERSION = "1.1"


def skill_text() -> str:
    """The Triton skill document (package data)."""
    return resources.files("triton_backend").joinpath("SKILL.md").read_text(encoding="utf-8")


@hookimpl
def register_backends(register) -> None:
    """Register backend ``triton``."""
    register("triton", TritonBackend, config_model=TritonConfig,
             description="Triton kernels (compiled on a CUDA GPU, interpreted on the CPU)")


@hookimpl
def register_skills(register) -> None:
    """Register skill ``triton`` for backend ``triton``."""
    register("triton", skill_text, backend="triton", description="Triton kernels in model_new.py")


@hookimpl
def doctor_checks() -> dict[str, dict[str, Any]]:
    """Whether Triton imports here, and its version."""
    try:
        import triton
    except ImportError as exc:
        return {"triton": {"ok": False, "detail": f"not importable: {exc}"}}
    return {"triton": {"ok": True, "detail": f"triton {triton.__version__}"}}
