"""Compiler and linker flags for building ``cuda_extension`` against the running torch.

Flags mirror what ``torch.utils.cpp_extension`` uses (C++20, the torch
include folders, the C++11 ABI define, the CUDA half-type defines) so that
release-style sources compile unchanged, but the build itself is ours
(``cuda_agent.harness.build``): incremental ninja, a shared binding object.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

#: Extension module name, on both backends.
MODULE_NAME = "cuda_extension"
#: Environment variable naming the CUDA arch to build for when no device is visible.
ARCH_ENV = "CUDA_AGENT_CUDA_ARCH"
#: Arch used when there is no device and no configuration (the H200's).
DEFAULT_ARCH = "sm_90a"

#: Environment variable naming the linker (``-fuse-ld=<value>``); ``default`` = the compiler's own.
#: Unset: gold when the compiler can use it (links against the torch libraries about 3x faster than bfd).
LINKER_ENV = "CUDA_AGENT_LINKER"
#: torch libraries the module links; the link reads only tiny stand-ins of them (see ``build.link_stub_flags``).
TORCH_LIBS = ("c10", "torch", "torch_cpu", "torch_python", "c10_cuda", "torch_cuda")
#: Extra flags of ``kernels/*_binding.cpp`` on the cuda backend, after the common ones. Empty: the binding's glue
#: (argument checks, the launch call) runs inside every timed call, so it keeps -O3 like everything else. -O1
#: compiled it about 0.6 s faster on the 2-core CI machine, but a build setting of ours must not slow the
#: candidate's launch path (unmeasured on the H200; the binding edit is inside its 5 s target without it).
BINDING_OPT_FLAGS: list[str] = []

#: nvcc defines torch's own extensions use (release-style sources rely on them).
TORCH_NVCC_DEFINES = [
    "-D__CUDA_NO_HALF_OPERATORS__",
    "-D__CUDA_NO_HALF_CONVERSIONS__",
    "-D__CUDA_NO_BFLOAT16_CONVERSIONS__",
    "-D__CUDA_NO_HALF2_OPERATORS__",
    "--expt-relaxed-constexpr",
]


@dataclass(frozen=True)
class Toolchain:
    """Everything needed to compile and link one backend's extension."""

    kind: str
    cxx: str
    nvcc: str | None
    ninja: str
    ccache: str | None
    cxx_flags: list[str] = field(default_factory=list)
    nvcc_flags: list[str] = field(default_factory=list)
    ld_flags: list[str] = field(default_factory=list)
    binding_flags: list[str] = field(default_factory=list)
    """Extra flags of ``kernels/*_binding.cpp`` edges (after ``cxx_flags``: a later ``-O`` wins)."""
    lib_dirs: list[str] = field(default_factory=list)
    """Folders the ``-l`` libraries of ``ld_flags`` are searched in (for link stand-ins)."""
    arch: str | None = None
    torch_version: str = ""

    def binding_key(self, source_digest: str) -> str:
        """Cache key of the shared binding object: backend, torch, flags, binding sources."""
        blob = "\n".join([self.kind, self.torch_version, self.cxx, " ".join(self.cxx_flags), source_digest])
        return hashlib.sha256(blob.encode()).hexdigest()[:20]


def find_ninja() -> str:
    """Path of the ninja binary (PATH, else the ``ninja`` PyPI package)."""
    found = shutil.which("ninja")
    if found:
        return found
    try:
        import ninja  # type: ignore[import-untyped]

        return str(Path(ninja.BIN_DIR) / "ninja")
    except ImportError as exc:  # pragma: no cover - ninja is a dependency
        raise RuntimeError("ninja not found on PATH and the 'ninja' package is not installed") from exc


def find_nvcc() -> str | None:
    """nvcc from CUDA_HOME, PATH, or /usr/local/cuda; None when absent."""
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH")):
        if home and (Path(home) / "bin" / "nvcc").is_file():
            return str(Path(home) / "bin" / "nvcc")
    found = shutil.which("nvcc")
    if found:
        return found
    default = Path("/usr/local/cuda/bin/nvcc")
    return str(default) if default.is_file() else None


def cuda_home(nvcc: str) -> Path:
    """The toolkit root (with ``include/cuda_runtime_api.h``) belonging to ``nvcc``.

    ``$CUDA_HOME``, then nvcc's own parent folder (symlinks resolved), then
    /usr/local/cuda: /usr/local/bin/nvcc is often a wrapper script.
    """
    candidates = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), str(Path(nvcc).resolve().parent.parent), "/usr/local/cuda"]
    for cand in candidates:
        if cand and (Path(cand) / "include" / "cuda_runtime_api.h").is_file():
            return Path(cand)
    raise RuntimeError(f"no CUDA toolkit headers found for {nvcc} (looked in $CUDA_HOME and /usr/local/cuda)")


def normalize_arch(arch: str) -> str:
    """'sm_90a' / '90a' / '9.0' / 'compute_90' -> 'sm_90a' / 'sm_90a' / 'sm_90' / 'sm_90'."""
    text = arch.strip().lower().replace("compute_", "").replace("sm_", "")
    if "." in text:
        major, minor = text.split(".", 1)
        text = f"{major}{minor}"
    if not text[:2].isdigit():
        raise ValueError(f"CUDA arch {arch!r} not understood; valid forms: 'sm_90a', '90', '9.0'")
    return f"sm_{text}"


#: The probe link: C++ that needs the C++ runtime, as every extension does. A C-only probe passed with gold on the
#: H200 image while every real link failed there: /opt/gcc's libstdc++.so is listed in its folder but cannot be
#: opened, which bfd skips (it links the static runtime) and gold does not.
_LINK_PROBE = '#include <string>\nstd::string cuda_agent_probe(int v) { return std::to_string(v); }\n'


@functools.lru_cache(maxsize=None)
def linker_flags(cxx: str) -> tuple[str, ...]:
    """``-fuse-ld=...`` for ``cxx``: ``$CUDA_AGENT_LINKER``, else gold when a probe link with it works, else none.

    The probe links a C++ shared object that uses the C++ runtime (the way every extension links); a linker
    that fails it is not used, and the compiler's default linker is.
    """
    choice = os.environ.get(LINKER_ENV, "").strip()
    if choice in ("default", "none"):
        return ()
    candidates = [choice] if choice else ["gold"]
    for linker in candidates:
        with tempfile.TemporaryDirectory() as tmp:
            src = Path(tmp) / "probe.cpp"
            src.write_text(_LINK_PROBE)
            try:
                proc = subprocess.run(
                    [cxx, f"-fuse-ld={linker}", "-shared", "-fPIC", str(src), "-o", str(Path(tmp) / "probe.so")],
                    capture_output=True, timeout=60,
                )
            except (OSError, subprocess.TimeoutExpired):
                continue
            if proc.returncode == 0:
                return (f"-fuse-ld={linker}",)
    return ()


@functools.lru_cache(maxsize=None)
def device_arch(index: int = 0) -> str | None:
    """Arch of GPU ``index`` via NVML (does not initialise CUDA in this process); None without a GPU.

    Hopper and Blackwell datacenter parts get the arch-specific target
    (``sm_90a``, ``sm_100a``) so Hopper-only instructions (wgmma, TMA) compile;
    it runs on exactly that capability, which is the device we build for.
    Cached per index (every build asks; NVML start-up costs tens of ms).
    """
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(handle)
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # no driver, no device: the caller falls back
        return None
    suffix = "a" if (major, minor) in {(9, 0), (10, 0), (10, 3), (12, 0)} else ""
    return f"sm_{major}{minor}{suffix}"


def gencode_flags(arch: str) -> list[str]:
    """nvcc ``-gencode`` flags for ``arch`` (SASS for it plus its PTX)."""
    sm = normalize_arch(arch)
    num = sm[3:]
    return [f"-gencode=arch=compute_{num},code=sm_{num}", f"-gencode=arch=compute_{num},code=compute_{num}"]


@functools.lru_cache(maxsize=None)
def _torch_facts() -> tuple[str, list[str], list[str], bool]:
    import torch
    from torch.utils import cpp_extension

    return (
        torch.__version__,
        list(cpp_extension.include_paths()),
        list(cpp_extension.library_paths()),
        bool(torch._C._GLIBCXX_USE_CXX11_ABI),
    )


def make_toolchain(kind: str, arch: str | None = None, device_index: int = 0) -> Toolchain:
    """Flags for backend ``kind`` ('cpu' or 'cuda') against the running torch.

    :param arch: CUDA arch ('sm_90a', '90'...); None = the visible device's,
        else ``$CUDA_AGENT_CUDA_ARCH``, else ``sm_90a``.
    """
    if kind not in ("cpu", "cuda"):
        raise ValueError(f"unknown build kind {kind!r}; valid: cpu, cuda")
    torch_version, includes, libdirs, cxx11_abi = _torch_facts()
    py_include = sysconfig.get_paths()["include"]
    cxx = os.environ.get("CXX") or shutil.which("c++") or shutil.which("g++") or "g++"
    defines = [
        f"-DTORCH_EXTENSION_NAME={MODULE_NAME}",
        "-DTORCH_API_INCLUDE_EXTENSION_H",
        f"-D_GLIBCXX_USE_CXX11_ABI={int(cxx11_abi)}",
    ]
    inc_flags = [f"-isystem{p}" for p in [*includes, py_include]]
    cxx_flags = ["-O3", "-std=c++20", "-fPIC", *defines, *inc_flags]
    ld_flags = [*linker_flags(cxx), *(f"-L{d}" for d in libdirs), *(f"-Wl,-rpath,{d}" for d in libdirs)]
    ld_flags += ["-lc10", "-ltorch", "-ltorch_cpu", "-ltorch_python"]
    nvcc = None
    nvcc_flags: list[str] = []
    binding_flags: list[str] = []
    lib_dirs = list(libdirs)
    resolved_arch = None
    if kind == "cpu":
        cxx_flags += ["-fopenmp", "-march=native"]
        ld_flags += ["-fopenmp"]
    else:
        nvcc = find_nvcc()
        if nvcc is None:
            raise RuntimeError("backend 'cuda' needs nvcc: none on PATH, $CUDA_HOME or /usr/local/cuda")
        home = cuda_home(nvcc)
        cxx_flags += [f"-isystem{home / 'include'}"]
        resolved_arch = normalize_arch(arch or device_arch(device_index) or os.environ.get(ARCH_ENV) or DEFAULT_ARCH)
        nvcc_flags = [
            "-O3",
            "-std=c++20",
            "--compiler-options=-fPIC",
            f"-ccbin={cxx}",
            *TORCH_NVCC_DEFINES,
            *defines,
            *(f"-I{p}" for p in [*includes, py_include]),
            *gencode_flags(resolved_arch),
        ]
        lib64 = home / "lib64"
        lib_dirs.append(str(lib64))
        binding_flags = list(BINDING_OPT_FLAGS)
        ld_flags += [f"-L{lib64}", f"-Wl,-rpath,{lib64}", "-lc10_cuda", "-ltorch_cuda", *shared_cudart_flags([lib64, *libdirs])]
    return Toolchain(
        kind=kind,
        cxx=cxx,
        nvcc=nvcc,
        ninja=find_ninja(),
        ccache=shutil.which("ccache"),
        cxx_flags=cxx_flags,
        nvcc_flags=nvcc_flags,
        ld_flags=ld_flags,
        binding_flags=binding_flags,
        lib_dirs=lib_dirs,
        arch=resolved_arch,
        torch_version=torch_version,
    )


def shared_cudart_flags(dirs: list[Path]) -> list[str]:
    """Link the CUDA runtime as a shared library, never ``libcudart_static.a``.

    The static runtime drags libc calls (``open``, ``fopen64``, ``syscall``,
    ``dlopen``...) into the module, which the binary integrity rules must
    refuse in candidate code; and torch already loads the shared runtime. When
    a folder has only ``libcudart.so.<major>`` (no unversioned link), link it
    by file name.
    """
    for d in dirs:
        if (Path(d) / "libcudart.so").exists():
            return [f"-L{d}", "-lcudart"]
    for d in dirs:
        versioned = sorted(Path(d).glob("libcudart.so.[0-9]*"))
        if versioned:
            return [f"-L{d}", f"-Wl,-rpath,{d}", f"-l:{versioned[0].name}"]
    return ["-lcudart"]  # let the linker report what is missing


def python_tag() -> str:
    """'cp311'-style tag, part of cache keys (pybind11 objects are per Python)."""
    return f"cp{sys.version_info.major}{sys.version_info.minor}"
