"""Lay the honest kernels of ``kernels.py`` out in the three public solution conventions.

``python examples/solutions/kernelbench/conventions.py [OUT]`` (default: this folder) writes::

    registry/{cpu,cuda}/<problem>/      model_new.py + kernels/<k>.{cpp,cu} + kernels/<k>_binding.cpp (REGISTER_BINDING)
    release/{cpu,cuda}/<problem>/       the same with a CUDA-Agent release binding (torch/extension.h,
                                        void register_<k>(pybind11::module& m) registered by REGISTER_BINDING)
    single_file/{cpu,cuda}/level_<L>_problem_<P>_sample_0_kernel.py   KernelBench single files (load_inline)

The workspaces score with ``cuda-agent score DIR --tasks 'kernelbench:KB'`` (named by the problem file's stem),
the single files as a KernelBench run folder, with no renaming.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from kernels import PROBLEMS, EntryPoint, Problem  # noqa: E402

CONVENTIONS = ("registry", "release", "single_file")
HERE = Path(__file__).resolve().parent


def _declaration(problem: Problem, kind: str) -> str:
    lines = problem.declarations.strip().splitlines()
    return lines[0] if kind == "cpu" else lines[1]


def _params(entry: EntryPoint, tensor_type: str) -> str:
    return ", ".join([f"{tensor_type} {t}" for t in entry.tensors] + [f"{ty} {n}" for ty, n in entry.scalars])


def _body(entry: EntryPoint, kind: str, empty: str, stream: str) -> str:
    checks = [f'TORCH_CHECK({t}.is_contiguous() && {t}.scalar_type() == at::kFloat, "{entry.name}: {t} must be a '
              f'contiguous float32 tensor");' for t in entry.tensors]
    if kind == "cuda":
        checks += [f'TORCH_CHECK({t}.is_cuda(), "{entry.name}: {t} must be a CUDA tensor");' for t in entry.tensors]
    ptrs = [f"const float* {t}_p = {t}.const_data_ptr<float>();" for t in entry.tensors]
    lead = entry.tensors[0]
    launch = entry.launch.format(dev="cpu" if kind == "cpu" else "launch",
                                 stream="" if kind == "cpu" else f", {stream}")
    call = (f"{launch};" if kind == "cpu" else
            f"const cudaError_t err = {launch};\n  TORCH_CHECK(err == cudaSuccess, \"{entry.name}: launch failed: \", "
            "cudaGetErrorString(err));")
    return "\n  ".join([*checks, f"auto out = {empty}({entry.out_shape}, {lead}.options());", *ptrs,
                        "float* out_p = out.mutable_data_ptr<float>();", call, "return out;"])


def registry_binding(problem: Problem, kind: str) -> str:
    """kernels/<k>_binding.cpp in this project's convention: the slim header and REGISTER_BINDING."""
    head = ['// Registers the entry points with REGISTER_BINDING (this project\'s convention).',
            '#include "../binding_registry.h"', "#include <ATen/ops/empty.h>"]
    if kind == "cuda":
        head.append("#include <cuda_runtime_api.h>")
    parts = ["\n".join(head), _declaration(problem, kind)]
    for e in problem.entries:
        stream = f"static_cast<cudaStream_t>(cuda_agent_binding::current_stream({e.tensors[0]}))"
        parts.append(f"at::Tensor {e.name}({_params(e, 'const at::Tensor&')}) {{\n  "
                     f"{_body(e, kind, 'at::empty', stream)}\n}}\n\nREGISTER_BINDING({e.name}, {e.name});")
    return "\n\n".join(parts) + "\n"


def release_binding(problem: Problem, kind: str) -> str:
    """kernels/<k>_binding.cpp in the CUDA-Agent release's convention: torch/extension.h, register_<k>(m)."""
    head = ["// CUDA-Agent release style: torch/extension.h and a pybind11 register function.",
            "#include <torch/extension.h>"]
    if kind == "cuda":
        head.append("#include <ATen/cuda/CUDAContext.h>")
    head.append('#include "../binding_registry.h"')
    parts = ["\n".join(head), _declaration(problem, kind)]
    defs = []
    for e in problem.entries:
        parts.append(f"torch::Tensor {e.name}({_params(e, 'torch::Tensor')}) {{\n  "
                     f"{_body(e, kind, 'torch::empty', 'at::cuda::getCurrentCUDAStream()')}\n}}")
        defs.append(f'  m.def("{e.name}", &{e.name}, "{e.name} ({problem.stem})");')
    parts.append(f"void register_{problem.kernel_name}(pybind11::module& m) {{\n" + "\n".join(defs) + "\n}")
    parts.append(f"REGISTER_BINDING({problem.kernel_name}, register_{problem.kernel_name});")
    return "\n\n".join(parts) + "\n"


def _indent(text: str, spaces: int) -> str:
    return "\n".join((" " * spaces + line) if line else line for line in text.splitlines())


def model_new(problem: Problem, *, ext_line: str, header: str) -> str:
    """ModelNew with Model's constructor and parameters; forward only calls the extension."""
    init_args = f", {problem.init_args}" if problem.init_args else ""
    init = _indent(problem.init, 8) if problem.init else ""
    return (f'{header}\nimport torch\nimport torch.nn as nn\n\n{ext_line}\n\n\nclass ModelNew(nn.Module):\n'
            f"    def __init__(self{init_args}):\n        super().__init__()\n{init + chr(10) if init else ''}"
            f"\n    def forward(self, {problem.forward_args}):\n{_indent(problem.forward, 8)}\n")


def single_file(problem: Problem, kind: str) -> str:
    """A KernelBench single file: ModelNew building its kernel with load_inline."""
    wrappers = []
    for e in problem.entries:
        wrappers.append(f"torch::Tensor {e.name}({_params(e, 'torch::Tensor')}) {{\n  "
                        f"{_body(e, kind, 'torch::empty', 'at::cuda::getCurrentCUDAStream()')}\n}}")
    protos = "\n".join(f"torch::Tensor {e.name}({_params(e, 'torch::Tensor')});" for e in problem.entries)
    functions = ", ".join(f'"{e.name}"' for e in problem.entries)
    name = f"kb_l{problem.level}_p{problem.number}_{kind}"
    if kind == "cpu":
        source = "#include <torch/extension.h>\n" + problem.cpu_kernel + "\n" + "\n\n".join(wrappers)
        load = (f'ext = load_inline(\n    name="{name}",\n    cpp_sources=cpp_source,\n    functions=[{functions}],\n'
                '    extra_cflags=["-O3", "-fopenmp"],\n    extra_ldflags=["-fopenmp"],\n    verbose=False,\n)')
        sources = f'cpp_source = r"""\n{source}\n"""\n'
    else:
        source = ("#include <torch/extension.h>\n#include <ATen/cuda/CUDAContext.h>\n" + problem.cuda_kernel + "\n"
                  + "\n\n".join(wrappers))
        load = (f'ext = load_inline(\n    name="{name}",\n    cpp_sources=cpp_source,\n    cuda_sources=cuda_source,\n'
                f'    functions=[{functions}],\n    extra_cuda_cflags=["-O3"],\n    verbose=False,\n)')
        sources = f'cpp_source = r"""\n#include <torch/extension.h>\n{protos}\n"""\n\ncuda_source = r"""\n{source}\n"""\n'
    header = (f'"""KernelBench level {problem.level} problem {problem.number} ({problem.stem}): an honest '
              f'{kind.upper()} kernel built with load_inline."""')
    ext_line = "from torch.utils.cpp_extension import load_inline\n\n" + sources + "\n" + load
    return model_new(problem, ext_line=ext_line, header=header)


def write_workspace(problem: Problem, convention: str, kind: str, root: Path) -> Path:
    """Write one workspace solution (model_new.py + kernels/) under ``root/<problem.stem>``."""
    ws = root / problem.stem
    (ws / "kernels").mkdir(parents=True, exist_ok=True)
    suffix = ".cpp" if kind == "cpu" else ".cu"
    kernel = problem.cpu_kernel if kind == "cpu" else problem.cuda_kernel
    (ws / "kernels" / f"{problem.kernel_name}{suffix}").write_text(kernel.lstrip())
    binding = registry_binding(problem, kind) if convention == "registry" else release_binding(problem, kind)
    (ws / "kernels" / f"{problem.kernel_name}_binding.cpp").write_text(binding)
    header = f'"""ModelNew for KernelBench {problem.stem}: {convention} convention, {kind} backend."""'
    (ws / "model_new.py").write_text(model_new(problem, ext_line="import cuda_extension as ext", header=header))
    return ws


def write_all(out: Path, conventions: tuple[str, ...] = CONVENTIONS, kinds: tuple[str, ...] = ("cpu", "cuda"),
              problems: tuple[Problem, ...] = PROBLEMS) -> dict[tuple[str, str], Path]:
    """Write every (convention, backend) folder under ``out``; returns the folder of each."""
    folders = {}
    for convention in conventions:
        for kind in kinds:
            folder = out / convention / kind
            folder.mkdir(parents=True, exist_ok=True)
            for problem in problems:
                if convention == "single_file":
                    name = f"level_{problem.level}_problem_{problem.number}_sample_0_kernel.py"
                    (folder / name).write_text(single_file(problem, kind))
                else:
                    write_workspace(problem, convention, kind, folder)
            folders[(convention, kind)] = folder
    return folders


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else HERE
    for (convention, kind), folder in write_all(target).items():
        print(f"{convention:12s} {kind:5s} {folder}")
