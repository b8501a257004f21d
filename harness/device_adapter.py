"""The device-adapter protocol: what a hardware backend provides, and what the trusted side keeps (docs/backends.md).

A backend is a kernel language on a device. Everything that decides a verdict is the harness's and is the same for
every backend: the sandbox, the input sets and their secret seeds, the reference process, the comparison, the
timing protocol, grading and the rewards. An adapter supplies only what differs between languages:

- **host side** (:class:`DeviceAdapter`, used by :class:`~cuda_agent.harness.device_backend.DeviceBackend`): the
  workspace layout, the build (no device needed; sandboxed when it runs a compiler), the static integrity rules of
  its language (source and binary), the KernelBench single-file form, the names of the candidate's own kernels
  (for Nsight Compute's and the sanitizer's filters), and which torch device its kernels run on;
- **sandbox side** (:class:`RunnerLoader`, named by :attr:`DeviceAdapter.runner_loader` and imported inside the
  sandboxed candidate runner from the installed package): the language's runtime made ready before the runner's
  integrity guard takes its snapshot (environment, imports, a first launch), the built artefacts imported before
  ``model_new.py``, and which GPU kernels count as the candidate's own.

Run, synchronize and time are the harness's, per :attr:`DeviceAdapter.device_kind`: the runner calls
``ModelNew.forward`` under the shared timer (``cuda``: CUDA events around a device-wide synchronize, L2 flushed and
persisting L2 reset before each call; ``cpu``: the host clock). An adapter cannot replace them, so no backend can
weaken a timing or a check; a language whose kernels run where torch tensors live (CUDA C++, Triton, CuTe DSL, HIP
through torch's ROCm build) needs nothing more.

The ``cpu`` and ``cuda`` backends are this protocol's first users (``cuda_agent.plugins.backends``), the Triton
backend of ``examples/triton-backend`` its first third-party one.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from cuda_agent.harness.build import BuildOutcome
    from cuda_agent.harness.integrity.violation import Violation
    from cuda_agent.harness.single_file_integrity import SingleFileCheck
    from cuda_agent.protocols import Workspace
    from cuda_agent.schemas.task import TaskManifest

#: Torch device types the harness runs candidates on (its sandbox, transports and timer know these).
DEVICE_KINDS: tuple[str, ...] = ("cpu", "cuda")


@runtime_checkable
class DeviceAdapter(Protocol):
    """The host side of a backend: layout, build, static integrity rules, facts.

    Attributes are plain class attributes; methods receive the backend's validated config block
    (:class:`~cuda_agent.harness.device_backend.BackendConfig` or a subclass) where they need settings.
    """

    #: Registered backend name ('cuda', 'cpu', 'triton').
    name: str
    #: Name of its skill document (registered through ``register_skills`` with ``backend=name``).
    skill: str
    #: Suffix of the kernel sources the agent writes ('.cu', '.cpp', '.py').
    kernel_suffix: str
    #: Torch device type its kernels run on, one of :data:`DEVICE_KINDS`: decides the sandbox's device, the
    #: hand-over of tensors, the timer and whether compute-sanitizer and Nsight Compute apply ('cuda').
    device_kind: str
    #: The kernel language, for people ('CUDA C++', 'C++/OpenMP', 'Triton').
    language: str
    #: ``"module:Class"`` of its :class:`RunnerLoader`, importable inside the sandbox (an installed package, never
    #: the workspace); None = :class:`~cuda_agent.harness.extension_loader.ExtensionLoader` (``cuda_extension``).
    runner_loader: str | None

    def availability(self, config: Any) -> tuple[bool, str]:
        """(usable here, reason): the toolchain and device it needs."""

    def device_facts(self, config: Any) -> dict[str, Any]:
        """Device, driver, toolchain versions (``cuda-agent doctor``, provenance)."""

    def task_for(self, task: TaskManifest, config: Any) -> TaskManifest:
        """The manifest this backend evaluates (e.g. the task's ``CPU_SIZES`` variant on a CPU device)."""

    def layout(self, task: TaskManifest, root: Path) -> Workspace:
        """A fresh workspace for ``task`` at ``root``: the protected reference ``model.py``, a starter
        ``model_new.py`` and whatever else the language needs, protected files marked."""

    def build(self, root: Path, build_dir: Path, config: Any, hidden: tuple[Path, ...]) -> BuildOutcome:
        """Build the workspace on the host (no device). ``so_path`` of the outcome is the artefact the runner
        imports (None when nothing is built ahead, e.g. JIT languages); ``hidden``: harness folders a sandboxed
        compiler must not see. Compiler errors go into the outcome, never raised."""

    def check_sources(self, root: Path) -> list[Violation]:
        """The static integrity rules of its language over the workspace (THREATS.md classes it can see)."""

    def check_binary(self, outcome: BuildOutcome) -> list[Violation]:
        """Rules over the built artefact (undefined symbols of a shared object...); [] when nothing was built."""

    def check_single_file(self, source: str, filename: str) -> SingleFileCheck:
        """Static checks of a KernelBench single-file solution in this language (``cuda-agent score``)."""

    def kernel_names(self, root: Path, outcome: BuildOutcome | None) -> list[str]:
        """Names of the candidate's own GPU kernels (Nsight Compute's kernel filter; kept out of the sanitizer's
        library filter); [] when they cannot be known ahead."""


@runtime_checkable
class RunnerLoader(Protocol):
    """The sandbox side of a backend, made by the candidate runner from :attr:`DeviceAdapter.runner_loader`.

    Trusted code from an installed package, run inside the sandbox as the candidate's uid. The runner calls
    :meth:`prepare` once before its integrity guard takes its first snapshot (so what the language runtime does
    to the process is not the candidate's doing), :meth:`load` before it imports ``model_new.py``, and
    :meth:`kernel_origin_violations` on the GPU kernels an audited call ran.
    """

    def prepare(self, device: str) -> None:
        """Make the language runtime ready on ``device`` ('cpu', 'cuda:0'): environment, imports, a first launch."""

    def load(self, workspace: Path, artifacts: Path, required: bool) -> Path | None:
        """Import the built artefacts of the staged ``workspace`` from ``artifacts`` (the staged build output);
        ``required``: a build exists and must import. Returns the binary kernel origins are judged against, if any."""

    def kernel_origin_violations(self, kernel_names: Iterable[str], workspace: Path,
                                 binary: Path | None) -> list[Violation]:
        """GPU kernels that ran during an audited forward but are not the candidate's own (T1)."""


def load_runner_loader(spec: str | None) -> RunnerLoader:
    """The :class:`RunnerLoader` named by ``spec`` (``"module:Class"``; None = the extension loader), made with no
    arguments. Raises ``ValueError`` naming the spec when it does not name a class of an importable module."""
    if spec is None:
        from cuda_agent.harness.extension_loader import ExtensionLoader

        return ExtensionLoader()
    import importlib

    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"runner loader {spec!r}: expected 'module:Class' (e.g. 'triton_backend.runner:TritonLoader')")
    try:
        obj = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"runner loader {spec!r} cannot be imported inside the sandbox: {exc}") from exc
    loader = obj()
    if not isinstance(loader, RunnerLoader):
        raise ValueError(f"runner loader {spec!r} lacks prepare/load/kernel_origin_violations (RunnerLoader)")
    return loader


def adapter_problems(adapter: Any) -> list[str]:
    """What keeps ``adapter`` from being a :class:`DeviceAdapter` (empty: nothing); used by the conformance kit."""
    problems = []
    for attr in ("name", "skill", "kernel_suffix", "device_kind", "language"):
        if not isinstance(getattr(adapter, attr, None), str) or not getattr(adapter, attr):
            problems.append(f"attribute {attr!r} must be a non-empty string")
    if getattr(adapter, "device_kind", None) not in DEVICE_KINDS:
        problems.append(f"device_kind {getattr(adapter, 'device_kind', None)!r} is not one of {', '.join(DEVICE_KINDS)}")
    loader = getattr(adapter, "runner_loader", "missing")
    if loader == "missing" or not (loader is None or (isinstance(loader, str) and ":" in loader)):
        problems.append(f"runner_loader must be 'module:Class' or None, got {loader!r}")
    for method in ("availability", "device_facts", "task_for", "layout", "build", "check_sources", "check_binary",
                   "check_single_file", "kernel_names"):
        if not callable(getattr(adapter, method, None)):
            problems.append(f"method {method}() is missing")
    return problems
