"""The task manifest: everything the trusted side knows about one task.

A task is a KernelBench-format Python module (``Model``, ``get_inputs()``,
``get_init_inputs()``, module-level sizes). The manifest is derived from it
by running it in a sandbox once (``cuda_agent.harness.tasks``), and stored
with the code so the reference always comes from the task store, never from
an agent's workspace.
"""

from __future__ import annotations

import hashlib
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from cuda_agent import INTERFACES_VERSION


def code_hash(code: str) -> str:
    """``sha256:<hex>`` of the task source, with line endings normalised."""
    return "sha256:" + hashlib.sha256(code.replace("\r\n", "\n").encode()).hexdigest()


class InputDomain(BaseModel):
    """The set of values an input may take, so widened hidden tests stay valid.

    ``kind`` names the distribution family the task's ``get_inputs`` draws
    from; ``low``/``high`` bound the *valid* domain (not just the sampled
    range): e.g. ``torch.rand`` gives kind ``uniform`` sampled in [0, 1), but
    if the operator accepts any real, ``low``/``high`` are ``None``.
    """

    model_config = ConfigDict(extra="forbid")

    kind: Literal["normal", "uniform", "integer", "bool", "index", "constant", "unknown"] = Field(
        "unknown", description="Distribution family of the task's own input generator."
    )
    low: float | None = Field(None, description="Inclusive lower bound of valid values; None = unbounded.")
    high: float | None = Field(None, description="Upper bound of valid values; None = unbounded.")
    sampled_low: float | None = Field(None, description="Smallest value seen in the task's own inputs.")
    sampled_high: float | None = Field(None, description="Largest value seen in the task's own inputs.")


class TensorSpec(BaseModel):
    """Shape, dtype and domain of one positional input or output."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="Positional name: 'input0', 'output0', ...")
    kind: Literal["tensor", "int", "float", "bool", "none", "other"] = Field(
        "tensor", description="Python type of the value; non-tensors are passed through unchanged."
    )
    shape: list[int] = Field(default_factory=list, description="Tensor shape; [] for scalars and non-tensors.")
    dtype: str | None = Field(None, description="torch dtype name without 'torch.', e.g. 'float32'.")
    domain: InputDomain = Field(default_factory=InputDomain, description="Valid value domain (inputs).")
    value: Any = Field(None, description="The value itself for non-tensor arguments (JSON-serialisable).")


class PrecisionContract(BaseModel):
    """How candidate and baseline must compute, and how closely they must agree."""

    model_config = ConfigDict(extra="forbid")

    compute_dtype: str = Field(
        "float32", description="Dtype the reference computes in; a candidate must not silently compute lower."
    )
    allow_tf32: bool = Field(False, description="Whether TF32 matmul/conv is acceptable for fp32 tasks.")
    tolerance: str = Field(
        "paper", description="Tolerance preset name: 'paper' (atol=rtol=1e-2) or 'dtype' (dtype-aware)."
    )
    atol: float | None = Field(None, description="Override of the preset's absolute tolerance.")
    rtol: float | None = Field(None, description="Override of the preset's relative tolerance.")


class UpstreamSource(BaseModel):
    """Where a task file came from upstream (a KernelBench problem): repository, commit, path, file hash."""

    model_config = ConfigDict(extra="forbid")

    repository: str = Field(description="Upstream repository, e.g. 'ScalingIntelligence/KernelBench'.")
    commit: str | None = Field(None, description="Commit of the checkout the file was read from; None = unknown.")
    path: str = Field(description="Path of the file inside the repository, e.g. 'KernelBench/level1/19_ReLU.py'.")
    file_sha256: str = Field(description="sha256 of the upstream file's bytes, before any size change.")


class TaskManifest(BaseModel):
    """One task, as the trusted side stores and serves it."""

    model_config = ConfigDict(extra="forbid")

    schema_version: str = Field(INTERFACES_VERSION, description="Interfaces version this record follows.")
    id: str = Field(description="Stable id, e.g. 'kernelbench/level1/19_ReLU' or 'examples/relu'.")
    name: str = Field(description="Short human name (file stem).")
    code: str = Field(description="The KernelBench-format module source; the reference.")
    code_hash: str = Field(description="code_hash(code); detects silent edits of the task store.")
    source: str = Field("", description="Where the task came from: a path, 'kernelbench:<root>', a dataset row.")
    level: int | None = Field(None, description="KernelBench level (1-4) when known.")
    inputs: list[TensorSpec] = Field(default_factory=list, description="Positional inputs of forward().")
    init_inputs: list[Any] = Field(default_factory=list, description="get_init_inputs() as JSON values.")
    outputs: list[TensorSpec] = Field(default_factory=list, description="Outputs of the reference forward().")
    precision: PrecisionContract = Field(default_factory=PrecisionContract, description="Precision contract.")
    flops: float | None = Field(None, description="FLOPs of one forward (FlopCounterMode), for the speed-of-light floor.")
    bytes_moved: float | None = Field(None, description="Minimum bytes read+written by one forward.")
    stochastic: bool = Field(False, description="The reference is non-deterministic (data synthesis drops these).")
    meta: dict[str, Any] = Field(default_factory=dict, description="Free-form provenance (data pipeline ops, etc.).")
    upstream: UpstreamSource | None = Field(
        None, description="The upstream file the task came from (KernelBench: commit and file hash); None = not known."
    )

    @classmethod
    def from_code(cls, id: str, code: str, **fields: Any) -> TaskManifest:
        """A manifest with ``code_hash`` filled; inputs/outputs come from the harness probe."""
        return cls(id=id, name=fields.pop("name", id.rsplit("/", 1)[-1]), code=code, code_hash=code_hash(code), **fields)
