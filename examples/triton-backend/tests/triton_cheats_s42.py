"""Session 42's false-rejection corpus (``honest_s42/``; :data:`PROBLEMS` names the problem each file solves): for
each honest idiom the static rules used to refuse, the cheat that abuses the same idiom, refused with this rule now
(``STATIC_S42``); and the honest idioms the harness's own allowlist still refuses (``HARNESS_FALSE_REJECTIONS``: fixes
there are the harness's, outside this package).

Fixed in ``triton_backend`` (each with its cheats below):

- ``tl.dot(a, b, allow_tf32=False)``, Triton's older spelling of ``input_precision="ieee"`` (T15.python.dtype_cast);
- ``from triton import cdiv`` / ``next_power_of_2`` (T1.python.submodule_call: an unknown function to the allowlist);
- Triton dtypes as data: ``OUT_DTYPE=tl.float32`` at a launch (T1.python.submodule_call), a module constant
  ``ACC = tl.float32`` read by a kernel (T1.python.import_not_allowed), a constexpr default naming a module constant
  (``BLOCK: tl.constexpr = DEFAULT_BLOCK``, T12.python.state_in_forward);
- kernel pointers annotated ``torch.Tensor`` (T1.python.torch_call);
- ``from triton.language.extra.cuda.libdevice import tanh`` (T1.python.native_access);
- a grid written as a local ``def grid(meta): return (...)`` (T1.python.operator / submodule_call);
- autotune configs in a module-level list, ``CONFIGS = [triton.Config(...)]`` (T1.python.module_statement);
- a module constant ``FAST = tl.constexpr(True)`` (or of a string) (T1.python.module_statement).

Found on the way, a false pass: a grid lambda's ``meta['out'].copy_(...)`` was read by the allowlist as a copy into
an unknown tensor (``copy_`` is an allocation method), with torch arithmetic on ``meta['x']`` read as numbers; a grid
may now read its argument only as ``meta['NAME']`` values.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from triton_cheats import HONEST, LAUNCH
from triton_support import REPO

CORPUS = Path(__file__).resolve().parent / "honest_s42"
VENDORED = REPO / "tests" / "kernelbench" / "data" / "KernelBench"
CHECKOUT = REPO / ".kernelbench" / "KernelBench"

#: Corpus file -> the problem it solves: ("example", task name) or (KernelBench root, "levelN/<file>.py").
PROBLEMS: dict[str, tuple[Path | str, str]] = {
    "ex_conv2d_relu_static_range.py": ("example", "conv2d_relu"),
    "ex_gemm_bias_relu_autotune_heuristics.py": ("example", "gemm_bias_relu"),
    "ex_row_sum_reduce.py": ("example", "row_sum"),
    "ex_softmax_online.py": ("example", "softmax"),
    "ex_swish_heuristics.py": ("example", "swish"),
    "kb1_19_relu_autotune.py": (VENDORED, "level1/19_ReLU.py"),
    "kb1_1_matmul_block_ptr.py": (VENDORED, "level1/1_Square_matrix_multiplication_.py"),
    "kb1_23_softmax_tutorial.py": (VENDORED, "level1/23_Softmax.py"),
    "kb2_12_gemm_mul_leakyrelu.py": (VENDORED, "level2/12_Gemm_Multiply_LeakyReLU.py"),
    "kb3_1_mlp_loop.py": (VENDORED, "level3/1_MLP.py"),
    "kb1_21_sigmoid_dtypes.py": (CHECKOUT, "level1/21_Sigmoid.py"),
    "kb1_22_tanh_libdevice.py": (CHECKOUT, "level1/22_Tanh.py"),
    "kb1_26_gelu_libdevice.py": (CHECKOUT, "level1/26_GELU_.py"),
    "kb1_36_rmsnorm.py": (CHECKOUT, "level1/36_RMSNorm_.py"),
    "kb1_3_bmm_batch_loop.py": (CHECKOUT, "level1/3_Batched_matrix_multiplication.py"),
    "kb1_40_layernorm_two_kernels.py": (CHECKOUT, "level1/40_LayerNorm.py"),
    "kb1_41_maxpool1d.py": (CHECKOUT, "level1/41_Max_Pooling_1D.py"),
    "kb1_47_sum_dim_atomic.py": (CHECKOUT, "level1/47_Sum_reduction_over_a_dimension.py"),
    "kb1_4_matvec_split_k.py": (CHECKOUT, "level1/4_Matrix_vector_multiplication_.py"),
    "kb1_51_argmax.py": (CHECKOUT, "level1/51_Argmax_over_a_dimension.py"),
    "kb1_5_matrix_scalar.py": (CHECKOUT, "level1/5_Matrix_scalar_multiplication.py"),
    "kb1_88_newgelu_math.py": (CHECKOUT, "level1/88_MinGPTNewGelu.py"),
    "kb1_89_cumsum_scan.py": (CHECKOUT, "level1/89_cumsum.py"),
    "kb1_94_mse_atomic_autotune.py": (CHECKOUT, "level1/94_MSELoss.py"),
    "kb1_97_sdpa_flash.py": (CHECKOUT, "level1/97_ScaledDotProductAttention.py"),
}
#: Graded on the GPU too (test_gpu.py), with the reason; the libdevice ones only there (the interpreter returns None).
GPU_ONLY = {
    "kb1_22_tanh_libdevice.py": "libdevice", "kb1_26_gelu_libdevice.py": "libdevice",
    "kb1_19_relu_autotune.py": "autotune", "kb1_1_matmul_block_ptr.py": "autotune",
    "ex_gemm_bias_relu_autotune_heuristics.py": "autotune", "kb1_94_mse_atomic_autotune.py": "autotune",
}


def _kernelbench(root: Path, rel: str):  # type: ignore[no-untyped-def]
    """The probed manifest of KernelBench problem ``rel`` of ``root`` at reduced sizes (as ``score`` makes it)."""
    from cuda_agent.harness.kernelbench_tasks import kernelbench_task
    from cuda_agent.harness.tasks import load_task_code

    level = int(rel.split("/")[0].removeprefix("level"))
    task = kernelbench_task(root / rel, root, level, "reduced")
    probed = load_task_code(task.code, task.id, source=task.source, level=task.level)
    return probed.model_copy(update={"meta": {**task.meta, **probed.meta}, "name": task.name, "upstream": task.upstream})


def corpus_task(name: str, probed):  # type: ignore[no-untyped-def]
    """The probed task corpus file ``name`` solves (skipped when the full checkout is absent)."""
    root, problem = PROBLEMS[name]
    if root == "example":
        return probed(problem)
    assert isinstance(root, Path)
    if not (root / problem).is_file():
        pytest.skip(f"{root / problem} is absent (the full checkout: bash scripts/fetch_kernelbench.sh)")
    return _kernelbench(root, problem)


GEMM = (Path(__file__).resolve().parents[1] / "solutions" / "gemm_bias_relu" / "model_new.py").read_text()
_DOT = 'acc += tl.dot(a, w, input_precision="ieee")'
_SIG = "def swish_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):"
_BODY = "    tl.store(out_ptr + offs, x * tl.sigmoid(x), mask=mask)\n"
_GRID = "        grid = (triton.cdiv(n, 1024),)\n"
_IMPORT = "import triton.language as tl\n"
#: A copy of x * sigmoid(x) into the output by torch, written with operators only (exp as a power).
_TORCH_SWISH = "meta['out_ptr'].copy_(meta['x_ptr'] / (1.0 + 2.718281828459045 ** -meta['x_ptr']))"


def _sub(source: str, old: str, new: str) -> str:
    assert old in source, old
    return source.replace(old, new)


STATIC_S42: dict[str, tuple[str, str]] = {  # name -> (source, rule id)
    # tl.dot: only a literal False in allow_tf32 (with no input_precision) reads as "ieee"
    "dot_allow_tf32_from_a_constant": (_sub(GEMM, _DOT, "acc += tl.dot(a, w, allow_tf32=TF32)").replace(
        "@triton.jit", "TF32 = tl.constexpr(True)\n\n\n@triton.jit"), "T15.python.dtype_cast"),
    "dot_allow_tf32_false_beside_tf32": (_sub(GEMM, _DOT, 'acc += tl.dot(a, w, allow_tf32=False, input_precision="tf32")'),
                                         "T15.python.dtype_cast"),
    "dot_positional_tf32": (_sub(GEMM, _DOT, 'acc += tl.dot(a, w, None, "tf32")'), "T15.python.dtype_cast"),
    "dot_positional_allow_tf32": (_sub(GEMM, _DOT, "acc += tl.dot(a, w, None, None, True)"), "T15.python.dtype_cast"),
    # from triton import cdiv: a math function to the allowlist, so on a tensor it is torch compute
    "from_triton_cdiv_on_a_tensor": (_sub(HONEST, "import triton\n", "import triton\nfrom triton import cdiv\n")
                                     .replace(LAUNCH, LAUNCH + "        out = cdiv(x * 1, 1)\n"), "T1.python.operator"),
    "from_triton_next_power_of_2_on_a_tensor": (
        _sub(HONEST, "import triton\n", "import triton\nfrom triton import next_power_of_2 as np2\n")
        .replace(LAUNCH, LAUNCH + "        n2 = np2(out)\n"), "T1.python.operator"),
    # a dtype is data only while `tl` is triton.language: a rebound alias keeps its tensors
    "dtype_name_on_a_rebound_alias": (_sub(_sub(HONEST, "        super().__init__()\n",
                                                "        super().__init__()\n        self.box = Box()\n"),
                                           LAUNCH, "        tl = self.box\n        scale = tl.float32 * 2.0\n"
                                           "        swish_kernel[grid](x, out, n, scale, BLOCK=1024)\n")
                                      .replace(_SIG, "def swish_kernel(x_ptr, out_ptr, n, scale, BLOCK: tl.constexpr):")
                                      .replace("class ModelNew", "class Box(nn.Module):\n    def __init__(self):\n"
                                               "        super().__init__()\n        self.float32 = nn.Parameter(torch.ones(1))"
                                               "\n\n\nclass ModelNew"), "T1.python.operator"),
    # module constants kernels read: dtypes, not Triton's classes or modules
    "module_constant_a_triton_module": (_sub(HONEST, "@triton.jit\n", "LANG = tl.core\n\n\n@triton.jit\n")
                                        .replace(_BODY, "    LANG.builtins\n" + _BODY), "T1.python.import_not_allowed"),
    "module_constant_a_triton_class": (_sub(HONEST, "@triton.jit\n", "ACC = tl.tensor\n\n\n@triton.jit\n")
                                       .replace(_BODY, "    y = ACC\n" + _BODY), "T1.python.import_not_allowed"),
    # a default may name a module constant bound only to literals
    "default_names_a_module_list": (_sub(HONEST, "@triton.jit\n", "CALLS = []\n\n\n@triton.jit\n")
                                    .replace(_SIG, _SIG.replace("):", ", S=CALLS):")), "T12.python.state_in_forward"),
    "default_names_a_rebound_constant": (_sub(HONEST, "@triton.jit\n", "B = 1024\nB = []\n\n\n@triton.jit\n")
                                         .replace(_SIG, _SIG.replace("BLOCK: tl.constexpr)", "BLOCK: tl.constexpr = B)")),
                                         "T12.python.state_in_forward"),
    # only `torch.Tensor` itself, only as a parameter's annotation
    "kernel_annotation_calls_torch": (_sub(HONEST, _SIG, _SIG.replace("n,", "n: torch.set_num_threads(1),")),
                                      "T1.python.torch_call"),
    "kernel_annotation_a_torch_function": (_sub(HONEST, _SIG, _SIG.replace("x_ptr,", "x_ptr: torch.sigmoid,")),
                                           "T1.python.torch_call"),
    "kernel_body_annotation_names_torch": (_sub(HONEST, _BODY, "    y: torch.Tensor = x\n" + _BODY),
                                           "T1.python.torch_call"),
    # libdevice's device functions by name, not the rest of the module
    "libdevice_import_of_core": (_sub(HONEST, _IMPORT, _IMPORT + "from triton.language.extra.cuda.libdevice import core\n")
                                 .replace(_BODY, "    core.builtins\n" + _BODY), "T1.python.native_access"),
    "libdevice_star_import": (_sub(HONEST, _IMPORT, _IMPORT + "from triton.language.extra.cuda.libdevice import *\n"),
                              "T1.python.native_access"),
    # a grid function reads meta['NAME'] values only (meta holds the launch's tensors)
    "grid_function_copies_with_torch": (_sub(HONEST, _GRID, "        def grid(meta):\n            return ("
                                             + _TORCH_SWISH + ".numel() * 0 + 1,)\n").replace("(x, out, n, ", "(x, out, 0, "),
                                        "T1.python.tensor_method"),
    "grid_lambda_copies_with_torch": (_sub(HONEST, _GRID, "        grid = lambda meta: (" + _TORCH_SWISH
                                           + ".numel() * 0 + 1,)\n").replace("(x, out, n, ", "(x, out, 0, "),
                                      "T1.python.tensor_method"),
    "grid_function_passes_meta_on": (_sub(HONEST, _GRID, "        def grid(meta):\n            return (len(meta),)\n"),
                                     "T1.python.tensor_method"),
    "grid_function_with_a_statement": (_sub(HONEST, _GRID, "        def grid(meta):\n            meta['out_ptr'].zero_()\n"
                                            "            return (triton.cdiv(n, meta['BLOCK']),)\n"),
                                       "T1.python.submodule_call"),
    # decorator data at module level: judged as decorator data, dropped only when nothing else reads it
    "config_list_with_a_pre_hook": (_sub(HONEST, "@triton.jit\n", "CONFIGS = [triton.Config({'BLOCK': 1024}, pre_hook="
                                         "lambda a: a['out_ptr'].zero_())]\n\n\n@triton.autotune(configs=CONFIGS, "
                                         "key=['n'])\n@triton.jit\n").replace(", BLOCK=1024)", ")"), "T1.python.decorator"),
    "config_list_runs_torch_at_import": (_sub(HONEST, "@triton.jit\n", "CONFIGS = [triton.Config({'BLOCK': "
                                              "int(torch.ones(1).sum()) * 1024})]\n\n\n@triton.autotune(configs=CONFIGS, "
                                              "key=['n'])\n@triton.jit\n").replace(", BLOCK=1024)", ")"),
                                         "T1.python.decorator"),
    "config_list_from_a_function_running_torch": (_sub(HONEST, "@triton.jit\n", "def make():\n    return [triton.Config("
                                                   "{'BLOCK': int(torch.ones(1).sum()) * 1024})]\n\n\nCONFIGS = make()\n\n\n"
                                                   "@triton.autotune(configs=CONFIGS, key=['n'])\n@triton.jit\n")
                                                  .replace(", BLOCK=1024)", ")"), "T1.python.decorator"),
    # a module-level tl.constexpr(literal) is read as its literal; anything else inside stays as written
    "constexpr_constant_wraps_torch": (_sub(HONEST, "@triton.jit\n", "ONE = tl.constexpr(int(torch.ones(1).sum()))\n\n\n"
                                            "@triton.jit\n"), "T1.python.module_statement"),
}


def _corpus(name: str) -> str:
    return (CORPUS / name).read_text()


#: Honest idioms the harness's own allowlist (``cuda_agent.harness.integrity``, every backend's) refused: each a
#: corpus file with the idiom put back, and the rule it met. The lead fixed all but the last in session 42
#: (``tests/integrity/test_static_methods_and_math_constants.py``, with the cheats beside them); they must pass.
HARNESS_FALSE_REJECTIONS: dict[str, tuple[str, str]] = {
    # python_calls.check_number_args is given skip=1 for a @staticmethod called as self.m(...): arguments are matched
    # to the parameter after theirs, so a tensor lands on `apply_relu: bool`
    "staticmethod_with_a_bool_parameter": (_sub(_corpus("kb3_1_mlp_loop.py"), "    def _linear(self, x: torch.Tensor,",
                                                "    @staticmethod\n    def _linear(x: torch.Tensor,"), "T1.python.operator"),
    # a static method called through its class is a call on an unknown object
    "staticmethod_called_on_the_class": (_sub(_corpus("ex_softmax_online.py"), "y = self.launch(", "y = ModelNew.launch("),
                                         "T1.python.submodule_call"),
    # python_function: a static method's parameters are tensors even when annotated int (size arithmetic refused)
    "staticmethod_size_arithmetic": (_sub(_corpus("ex_softmax_online.py"), "    def launch(x2d: torch.Tensor) -> torch.Tensor:\n"
                                          "        rows, cols = x2d.shape\n", "    def launch(x2d: torch.Tensor, block: int = 256)"
                                          " -> torch.Tensor:\n        rows, cols = x2d.shape\n        block = min(block, "
                                          "triton.next_power_of_2(cols))\n"), "T1.python.operator"),
    # math.pi / math.e are read as module members (functions), not numbers
    "math_pi_in_forward": (_sub(_corpus("kb1_88_newgelu_math.py"), "sqrt_2_over_pi=SQRT_2_OVER_PI",
                                "sqrt_2_over_pi=math.sqrt(2.0 / math.pi)"), "T1.python.operator"),
}

#: Refused on purpose: a forward input annotated float is a tensor to the allowlist (the annotation is the
#: candidate's word; the harness passes what ``get_inputs()`` makes), so handing it to a helper's ``s: float``, whose
#: body computes with it as a number, is refused. Handing it to the kernel directly (the corpus file) passes.
REFUSED_ON_PURPOSE: dict[str, tuple[str, str]] = {
    "scalar_input_to_a_typed_helper": (_sub(_corpus("kb1_5_matrix_scalar.py"), "def matrix_scalar(a: torch.Tensor, s,",
                                            "def matrix_scalar(a: torch.Tensor, s: float,"), "T1.python.operator"),
}
