"""Building a workspace into the Python module ``cuda_extension``: fast, incremental, sandboxed.

:func:`build_extension` compiles ``kernels/*.cu`` (nvcc) and ``kernels/*.cpp``
(C++), each through its own edge of a per-workspace ``build.ninja``, so a
second build with nothing changed recompiles nothing and touching one kernel
recompiles one translation unit. The protected ``binding.cpp`` (the heavy
pybind11/torch-Python TU) is compiled once per (backend, torch version,
Python, flags) into a shared cache and linked into every workspace's module.
Kernel bindings include the slim ``binding_registry.h`` (``ATen/core/Tensor.h``
only); release-style bindings that include ``torch/extension.h`` build too,
just slower.

The compiler runs under bubblewrap when usable (read-only root and workspace,
writable build folder, no network), with a timeout; its output is trimmed to
the first errors with their file:line.

Import the result by putting ``so_path.parent`` first on ``sys.path`` and
``import cuda_extension``.
"""

from __future__ import annotations

import dataclasses
import fcntl
import hashlib
import os
import re
import subprocess
import time
from pathlib import Path
from collections.abc import Callable
from typing import Literal

import structlog
from pydantic import BaseModel, Field

from cuda_agent.harness._binding_sources import BINDING_CPP, BINDING_REGISTRY_H
from cuda_agent.harness._build_log import BuildError, parse_errors, relativize, trim_log
from cuda_agent.harness._build_sandbox import run_sandboxed
from cuda_agent.harness._ninja import count_compile_steps, ninja_text, write_if_changed
from cuda_agent.harness._toolchain import MODULE_NAME, TORCH_LIBS, Toolchain, make_toolchain, python_tag
from cuda_agent.harness.layout import KERNELS_DIR, binding_sources, kernel_sources

log = structlog.get_logger(__name__)

#: Environment variable overriding the shared build cache folder.
CACHE_ENV = "CUDA_AGENT_BUILD_CACHE"
#: Seconds the one-off shared binding compile may take (torch-Python headers are heavy).
BINDING_TIMEOUT_S = 900.0


class BuildOutcome(BaseModel):
    """What one build of a workspace produced."""

    ok: bool = Field(description="The module was built and is ready to import.")
    so_path: Path | None = Field(None, description="The built cuda_extension shared object (None on failure).")
    log: str = Field("", description="Compiler output trimmed to the first errors, paths relative to the workspace.")
    duration_s: float = Field(0.0, description="Wall time of the build, seconds.")
    steps: int = Field(0, description="Translation units recompiled (0 = nothing changed).")
    errors: list[BuildError] = Field(default_factory=list, description="Located compiler/linker errors.")
    isolation: str = Field("none", description="How the compiler ran: 'bwrap' or 'process'.")
    arch: str | None = Field(None, description="CUDA arch built for (cuda backend), e.g. 'sm_90a'.")
    binding_object: Path | None = Field(None, description="The shared prebuilt binding object linked in.")


def pch_enabled() -> bool:
    """Precompiled binding header on, unless ``CUDA_AGENT_NO_PCH=1`` (for comparisons)."""
    return os.environ.get("CUDA_AGENT_NO_PCH", "") not in ("1", "true", "yes")


def default_cache_dir() -> Path:
    """Shared build cache: ``$CUDA_AGENT_BUILD_CACHE`` or ``~/.cache/cuda-agent/build``."""
    env = os.environ.get(CACHE_ENV)
    return Path(env) if env else Path.home() / ".cache" / "cuda-agent" / "build"


def _binding_digest() -> str:
    return hashlib.sha256((BINDING_CPP + "\0" + BINDING_REGISTRY_H).encode()).hexdigest()


def _cache_folder(toolchain: Toolchain, kind: str, cache_dir: Path | None) -> Path:
    """``<cache>/<kind>/<key>``: one folder per toolchain, Python and binding-source version."""
    key = f"{toolchain.kind}-{python_tag()}-{toolchain.binding_key(_binding_digest())}"
    return Path(cache_dir or default_cache_dir()) / kind / key


def _build_once(folder: Path, product: Path, build: Callable[[], None]) -> None:
    """Run ``build`` (which must create ``product`` atomically, or not at all) once across processes."""
    if product.is_file():
        return
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not product.is_file():
            build()


def shared_binding_object(toolchain: Toolchain, cache_dir: Path | None = None) -> Path:
    """The compiled ``binding.cpp`` for ``toolchain``; compiled on first use, then reused.

    Concurrent callers wait on a file lock; the object appears atomically.

    :raises RuntimeError: the binding failed to compile (a harness bug, not the agent's).
    """
    folder = _cache_folder(toolchain, "binding", cache_dir)
    obj = folder / "binding.o"

    def build() -> None:
        for rel, text in binding_sources().items():
            (folder / rel).write_text(text)
        tmp = folder / f"binding.o.tmp{os.getpid()}"
        cmd = [toolchain.cxx, *toolchain.cxx_flags, f"-I{folder}", "-c", str(folder / "binding.cpp"), "-o", str(tmp)]
        started = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=BINDING_TIMEOUT_S)
        if proc.returncode != 0:
            raise RuntimeError(
                f"compiling the shared binding object failed (harness bug, not the agent's):\n"
                f"{trim_log(proc.stdout + proc.stderr)}"
            )
        os.replace(tmp, obj)
        log.info("binding_object_built", key=folder.name, seconds=round(time.perf_counter() - started, 1))

    _build_once(folder, obj, build)
    return obj


def shared_pch(toolchain: Toolchain, cache_dir: Path | None = None) -> Path | None:
    """A precompiled ``binding_registry.h`` for ``toolchain`` (gcc only); None when unavailable.

    Returns the header copy to force-include; its ``.gch`` sits next to it.
    Compiled once per key like the binding object; a failure just disables it.
    """
    folder = _cache_folder(toolchain, "pch", cache_dir)
    header = folder / "binding_registry.h"
    gch = folder / "binding_registry.h.gch"
    failed_marker = folder / "FAILED"
    if failed_marker.exists() and not gch.is_file():
        return None

    def build() -> None:
        header.write_text(BINDING_REGISTRY_H)
        tmp = folder / f"binding_registry.h.gch.tmp{os.getpid()}"
        cmd = [toolchain.cxx, *toolchain.cxx_flags, "-x", "c++-header", str(header), "-o", str(tmp)]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=BINDING_TIMEOUT_S)
        if proc.returncode != 0 or not tmp.is_file():
            failed_marker.write_text(proc.stdout + proc.stderr)
            log.warning("pch_unavailable", key=folder.name, reason=trim_log(proc.stdout + proc.stderr)[:300])
            return
        os.replace(tmp, gch)

    _build_once(folder, gch, build)
    return header if gch.is_file() else None


_SONAME = re.compile(r"\(SONAME\)\s+Library soname: \[(.+)\]")


def _soname(lib: Path) -> str:
    """DT_SONAME of a shared library (``readelf -d``); its file name when it has none."""
    proc = subprocess.run(["readelf", "-d", str(lib)], capture_output=True, text=True, timeout=60)
    match = _SONAME.search(proc.stdout) if proc.returncode == 0 else None
    return match.group(1) if match else lib.name


def link_stub_flags(toolchain: Toolchain, cache_dir: Path | None = None) -> tuple[list[str], Path | None]:
    """``toolchain.ld_flags`` with the torch libraries swapped for empty stand-ins of the same SONAME.

    Reading the symbol tables of ``libtorch_cpu``/``libtorch_cuda`` (hundreds of MB) is most of
    the link's time. A shared object may leave symbols undefined (``-shared`` without
    ``-z defs``), so linking against an empty library with the real one's SONAME records the
    same ``DT_NEEDED`` entry and the same undefined symbols (torch's own symbols carry no
    versions): the loader finds the real library through the rpath and binds as before. The
    stand-ins are built once per set of real libraries into ``<cache>/linkstubs/<key>``.
    Returns ``(ld_flags, stub folder)``; the flags are unchanged (folder None) when no torch library
    is found, the stand-ins cannot be built or ``CUDA_AGENT_NO_LINK_STUBS=1``.
    """
    if os.environ.get("CUDA_AGENT_NO_LINK_STUBS", "") in ("1", "true", "yes"):
        return list(toolchain.ld_flags), None
    wanted = [flag[2:] for flag in toolchain.ld_flags if flag.startswith("-l") and flag[2:] in TORCH_LIBS]
    real: dict[str, Path] = {}
    for name in wanted:
        found = next((Path(d) / f"lib{name}.so" for d in toolchain.lib_dirs if (Path(d) / f"lib{name}.so").is_file()), None)
        if found is not None:  # one not found stays ``-l``: the linker looks for it (and reports it) as before
            real[name] = found.resolve()
    if not real:
        return list(toolchain.ld_flags), None
    blob = "\n".join([toolchain.cxx, *(f"{n}={p}:{p.stat().st_size}:{p.stat().st_mtime_ns}" for n, p in sorted(real.items()))])
    folder = Path(cache_dir or default_cache_dir()) / "linkstubs" / hashlib.sha256(blob.encode()).hexdigest()[:20]
    done = folder / "DONE"

    def build() -> None:
        for name, path in real.items():
            tmp = folder / f"lib{name}.so.tmp{os.getpid()}"
            cmd = [toolchain.cxx, "-shared", "-fPIC", "-x", "c", os.devnull, f"-Wl,-soname,{_soname(path)}", "-o", str(tmp)]
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
            if proc.returncode != 0:
                log.warning("link_stubs_unavailable", reason=trim_log(proc.stdout + proc.stderr)[:300])
                return
            os.replace(tmp, folder / f"lib{name}.so")
        done.write_text("\n".join(f"lib{n}.so -> {p}" for n, p in real.items()) + "\n")

    try:
        _build_once(folder, done, build)
    except (OSError, subprocess.SubprocessError) as exc:
        log.warning("link_stubs_unavailable", reason=str(exc)[:300])
        return list(toolchain.ld_flags), None
    if not done.is_file():
        return list(toolchain.ld_flags), None
    # --no-as-needed around the stand-ins only: they define nothing, yet their DT_NEEDED must stay
    # (some compilers default to --as-needed); the other libraries keep the compiler's default.
    flags = []
    for flag in toolchain.ld_flags:
        name = flag[2:] if flag.startswith("-l") else None
        if name in real:
            flags += ["-Wl,--push-state,--no-as-needed", str(folder / f"lib{name}.so"), "-Wl,--pop-state"]
        else:
            flags.append(flag)
    return flags, folder


def _check_workspace(workspace_root: Path, kind: str) -> list[BuildError]:
    """Errors found before compiling: edited protected binding files, wrong kernel suffix."""
    errors = []
    for rel, text in binding_sources().items():
        path = workspace_root / rel
        if not path.is_file() or path.read_text() != text:
            errors.append(
                BuildError(
                    file=rel,
                    message=f"{rel} is protected (written by cuda-agent) and was changed or removed; "
                    "register kernels in kernels/<name>_binding.cpp with REGISTER_BINDING instead",
                )
            )
    if kind == "cpu":
        for src in kernel_sources(workspace_root):
            if src.suffix == ".cu":
                rel = str(src.relative_to(workspace_root))
                errors.append(
                    BuildError(
                        file=rel,
                        message=f"{rel}: .cu files need the 'cuda' backend; this workspace builds with the 'cpu' "
                        f"backend (C++/OpenMP), which compiles kernels/*.cpp only -- rename it to "
                        f"{rel[:-3]}.cpp with C++ code",
                    )
                )
    return errors


def build_extension(
    workspace_root: Path,
    kind: Literal["cpu", "cuda"],
    build_dir: Path,
    *,
    arch: str | None = None,
    timeout_s: float = 300,
    cache_dir: Path | None = None,
    isolation: Literal["auto", "bwrap", "process"] = "auto",
    hidden: tuple[Path, ...] = (),
    link: bool = True,
) -> BuildOutcome:
    """Build ``workspace_root`` into ``build_dir/cuda_extension.so`` for backend ``kind``.

    :param workspace_root: a workspace in the release layout (``cuda_agent.harness.layout``).
    :param kind: ``"cpu"`` (C++/OpenMP) or ``"cuda"`` (nvcc).
    :param build_dir: where objects and the module go; keep it between builds
        of the same workspace for incremental builds, use a fresh one to
        rebuild from scratch (grading).
    :param arch: CUDA arch; None = the device's (``sm_90a`` on H200), else
        ``$CUDA_AGENT_CUDA_ARCH``, else ``sm_90a``.
    :param timeout_s: wall-clock limit of the compile, seconds.
    :param cache_dir: shared cache of binding objects; default :func:`default_cache_dir`.
    :param isolation: ``auto`` (bubblewrap when usable), ``bwrap`` or ``process``.
    :param hidden: folders to hide from the compiler (harness state).
    :param link: False compiles the object files only (``so_path`` stays None):
        the CUDA path can be exercised up to linking where torch has no CUDA.
    """
    started = time.perf_counter()
    workspace_root = Path(workspace_root).absolute()
    build_dir = Path(build_dir).absolute()
    build_dir.mkdir(parents=True, exist_ok=True)

    def failed(errors: list[BuildError], log_text: str, isolation_used: str = "none", steps: int = 0) -> BuildOutcome:
        return BuildOutcome(
            ok=False,
            log=log_text,
            errors=errors,
            duration_s=time.perf_counter() - started,
            steps=steps,
            isolation=isolation_used,
        )

    if not (workspace_root / KERNELS_DIR).is_dir():
        err = BuildError(file=KERNELS_DIR, message=f"no {KERNELS_DIR}/ folder in the workspace {workspace_root}")
        return failed([err], err.message)
    pre = _check_workspace(workspace_root, kind)
    if pre:
        return failed(pre, "\n".join(f"error: {e.message}" for e in pre))
    try:
        toolchain = make_toolchain(kind, arch=arch)
    except (RuntimeError, ValueError) as exc:
        return failed([BuildError(message=str(exc))], str(exc))
    stubs: Path | None = None
    if link:
        binding_obj = shared_binding_object(toolchain, cache_dir)
        ld_flags, stubs = link_stub_flags(toolchain, cache_dir)
        toolchain = dataclasses.replace(toolchain, ld_flags=ld_flags)
    else:  # never built: only the link edge needs it
        binding_obj = Path(cache_dir or default_cache_dir()) / "binding" / "not-linked" / "binding.o"
    pch = shared_pch(toolchain, cache_dir) if pch_enabled() else None
    output = build_dir / f"{MODULE_NAME}.so"
    text = ninja_text(toolchain, workspace_root, build_dir, kernel_sources(workspace_root), binding_obj, output, pch)
    write_if_changed(build_dir / "build.ninja", text)
    run = run_sandboxed(
        [toolchain.ninja, "-C", str(build_dir), *([] if link else ["objects"])],
        readonly=[workspace_root, *([binding_obj.parent] if link else []), *([stubs] if stubs else []), *([pch.parent] if pch else [])],
        writable=[build_dir],
        hidden=hidden,
        timeout_s=timeout_s,
        isolation=isolation,
        env={"NINJA_STATUS": "[%f/%t] "},
        background=True,  # behind the processes timing on a GPU (BACKGROUND_NICE)
    )
    raw = relativize(run.output, workspace_root, build_dir)
    steps = count_compile_steps(raw)
    if run.timed_out:
        msg = f"compilation timed out after {timeout_s:.0f} s (limit); simplify templates/unrolling or split the file"
        return failed([BuildError(message=msg)], msg + "\n" + trim_log(raw), run.isolation, steps)
    if run.returncode != 0 or (link and not output.is_file()):
        errors = parse_errors(raw) or [BuildError(message="build failed; see the log")]
        return failed(errors, trim_log(raw), run.isolation, steps)
    return BuildOutcome(
        ok=True,
        so_path=output if link else None,
        log=trim_log(raw) if "warning" in raw else "",
        duration_s=time.perf_counter() - started,
        steps=steps,
        isolation=run.isolation,
        arch=toolchain.arch,
        binding_object=binding_obj if link else None,
    )
