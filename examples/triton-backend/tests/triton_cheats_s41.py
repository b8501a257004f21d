"""Session 41's red team against the Triton backend: the ``model_new.py`` files that earned reward (or reached Python
the allowlist never saw) before ``triton_backend.kernel_scope``, each with the rule that refuses it now.

Every one passed ``check_triton_source`` before: the rewrite the harness's allowlist judges blanks kernels with their
decorators, reads every ``meta[...]`` of a one-argument lambda as the number 1, and left kernel objects and kernel
bodies' attribute chains unchecked.
"""

from __future__ import annotations

from triton_cheats import HONEST, LAUNCH

_SIG = "def swish_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):"
_BODY = "    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)\n    tl.store(out_ptr + offs, x * tl.sigmoid(x), mask=mask)\n"


def _decorated(decorator: str, extra: str = "") -> str:
    return HONEST.replace("@triton.jit\n", f"{decorator}\n@triton.jit\n").replace(
        _SIG, _SIG.replace("):", f", {extra}: tl.constexpr):") if extra else _SIG)


#: Graded correct end to end before the fix (CPU, interpreter): torch computes the output in a heuristics lambda,
#: only when the op audit's dispatch mode is not installed; the kernel computes when it is.
HEURISTICS_EVADE_AUDIT = _decorated(
    "@triton.heuristics({'TORCH': lambda a: torch._C._len_torch_dispatch_stack() == 0 and "
    "a['out_ptr'].copy_(torch.sigmoid(a['x_ptr']) * a['x_ptr']) is not None})", "TORCH").replace(
    _BODY, "    if not TORCH:\n" + "".join("    " + line + "\n" for line in _BODY.splitlines()))

STATIC_S41: dict[str, tuple[str, str]] = {  # name -> (source, rule id)
    "heuristics_lambda_evades_the_op_audit": (HEURISTICS_EVADE_AUDIT, "T1.python.decorator"),
    "heuristics_lambda_computes_with_torch": (_decorated(
        "@triton.heuristics({'D': lambda a: a['out_ptr'].copy_(a['x_ptr'] * torch.sigmoid(a['x_ptr'])) is None})",
        "D"), "T1.python.decorator"),
    "heuristics_call_counter_in_a_default": (_decorated(
        "@triton.heuristics({'LAZY': lambda a, c=[0]: c.append(1) or len(c) > 12})", "LAZY"), "T1.python.decorator"),
    "autotune_config_pre_hook": (_decorated(
        "@triton.autotune(configs=[triton.Config({}, pre_hook=lambda a: a['out_ptr'].copy_(a['x_ptr']))], key=[])"),
        "T1.python.decorator"),
    "autotune_positional_pre_hook": (_decorated(
        "@triton.autotune([triton.Config({}, 4, 3, 1, None, lambda a: a['out_ptr'].zero_())], ['n'])"),
        "T1.python.decorator"),
    "autotune_hook_function": (HONEST.replace("@triton.jit\n", "def hook(a):\n    a['out_ptr'].zero_()\n\n\n"
                                              "@triton.autotune(configs=[triton.Config({}, pre_hook=hook)], key=['n'])\n"
                                              "@triton.jit\n"), "T1.python.decorator"),
    "code_run_by_a_jit_argument": (HONEST.replace("@triton.jit\n", "@triton.jit(do_not_specialize="
                                                  "[__import__('os').getpid() and 'n'])\n"), "T1.python.decorator"),
    "kernel_body_run_as_python": (HONEST.replace("class ModelNew", "@triton.jit\ndef helper(x_ptr, out_ptr):\n"
                                                 "    out_ptr.copy_(x_ptr * x_ptr.sigmoid())\n\n\nclass ModelNew")
                                  .replace(LAUNCH, LAUNCH + "        helper.fn(x, out)\n"), "T1.python.native_access"),
    "kernel_wrapped_in_forward": (HONEST.replace(LAUNCH, "        k = triton.autotune(configs=[triton.Config({})], key=[])"
                                                 "(swish_kernel)\n" + LAUNCH), "T1.python.native_access"),
    "kernel_reaches_dunder": (HONEST.replace(_BODY, _BODY + "    tl.load.__globals__['__builtins__']\n"),
                              "T1.python.reflection"),
    "kernel_walks_out_of_triton_language": (HONEST.replace(_BODY, _BODY + "    tl.core.builtins.print(n)\n"),
                                            "T1.python.native_access"),
    "kernel_reaches_triton_runtime": (HONEST.replace(_BODY, _BODY + "    triton.runtime.driver.active\n"),
                                      "T1.python.native_access"),
    "kernel_state_in_a_module_list": (HONEST.replace("@triton.jit\n", "CALLS = []\n\n\n@triton.jit\n").replace(
        "    mask = offs < n\n", "    CALLS.append(1)\n    mask = offs < n\n"), "T1.python.import_not_allowed"),
    "kernel_state_in_a_default": (HONEST.replace(_SIG, _SIG.replace("):", ", S=[]):")), "T12.python.state_in_forward"),
    "grid_lambda_computes_on_a_launch_tensor": (HONEST.replace(
        LAUNCH, "        swish_kernel[lambda meta: (meta['x_ptr'].sigmoid().mul_(meta['x_ptr']).numel() and 1,)]"
                "(x, out, n, BLOCK=1024)\n"), "T1.python.tensor_method"),
}

#: Idioms of honest Triton code the new rules must keep accepting.
HONEST_IDIOMS: dict[str, str] = {
    "autotune_configs": _decorated("@triton.autotune(configs=[triton.Config({'BLOCK': 1024}, num_warps=4), "
                                   "triton.Config({'BLOCK': 512}, num_warps=2, num_stages=2)], key=['n'])")
    .replace("swish_kernel[grid](x, out, n, BLOCK=1024)", "swish_kernel[lambda meta: (triton.cdiv(n, meta['BLOCK']),)](x, out, n)"),
    "autotune_config_function": HONEST.replace("@triton.jit\n", (
        "def get_configs():\n    configs = []\n    for b in [256, 512, 1024]:\n        for w in (2, 4):\n"
        "            configs.append(triton.Config({'BLOCK': b}, num_warps=w))\n    return configs\n\n\n"
        "@triton.autotune(configs=get_configs(), key=['n'], reset_to_zero=['out_ptr'])\n@triton.jit\n")).replace(
        "swish_kernel[grid](x, out, n, BLOCK=1024)", "swish_kernel[lambda META: (triton.cdiv(META['n'], META['BLOCK']),)](x, out, n)"),
    "autotune_config_comprehension": HONEST.replace("@triton.jit\n", (
        "def get_configs():\n    return [triton.Config({'BLOCK': b}, num_warps=w) for b in (256, 1024) for w in [2, 4]]\n\n\n"
        "@triton.autotune(configs=get_configs(), key=['n'])\n@triton.jit\n")),
    "heuristics": _decorated("@triton.heuristics({'EVEN': lambda args: args['n'] % args['BLOCK'] == 0, "
                             "'B2': lambda args: triton.next_power_of_2(args['n'])})"),
    "jit_arguments": HONEST.replace("@triton.jit\n", "@triton.jit(do_not_specialize=['n'])\n"),
    "libdevice": HONEST.replace("x * tl.sigmoid(x)", "x / (1.0 + tl.extra.cuda.libdevice.exp(-x))"),
    "tl_math": HONEST.replace("x * tl.sigmoid(x)", "x / (1.0 + tl.math.exp(-x))"),
    "module_constants": HONEST.replace("@triton.jit\n", "SCALE = tl.constexpr(1.0)\nNEG = -1\n\n\n@triton.jit\n")
    .replace("x * tl.sigmoid(x)", "x * tl.sigmoid(x) * SCALE * -NEG"),
    "literal_default": HONEST.replace("BLOCK: tl.constexpr", "BLOCK: tl.constexpr = 1024"),
    "tensor_methods": HONEST.replace("x * tl.sigmoid(x)", "(x * tl.sigmoid(x)).to(out_ptr.dtype.element_ty)"),
}

_IMPORT = "import triton.language as tl\n"
_LIBDEVICE = HONEST.replace(_IMPORT, _IMPORT + "from triton.language.extra import libdevice\n")

#: Refused by the static rules only after the session-41 review (the lead's): libdevice idioms (the first two were
#: refused before the red team too, `importing triton.language.extra`) and dtype defaults (refused by its literal rule).
HONEST_IDIOMS.update({
    "libdevice_from_extra": _LIBDEVICE.replace("x * tl.sigmoid(x)", "x / (1.0 + libdevice.exp(-x))"),
    "libdevice_from_extra_cuda": HONEST.replace(_IMPORT, _IMPORT + "from triton.language.extra.cuda import libdevice\n")
    .replace("x * tl.sigmoid(x)", "x * tl.sigmoid(x) + 0.0 * libdevice.tanh(x)"),
    "libdevice_module_alias": HONEST.replace(_IMPORT, _IMPORT + "import triton.language.extra.cuda.libdevice as ld\n")
    .replace("x * tl.sigmoid(x)", "x * tl.sigmoid(x) + 0.0 * ld.erf(x)"),
    "dtype_default": HONEST.replace("BLOCK: tl.constexpr)", "BLOCK: tl.constexpr, DT: tl.constexpr = tl.float32)"),
    "dtype_default_long": HONEST.replace("BLOCK: tl.constexpr)",
                                         "BLOCK: tl.constexpr, DT: tl.constexpr = triton.language.bfloat16)"),
})
#: ... while what they could open stays shut.
STATIC_S41.update({
    "libdevice_outside_a_kernel": (_LIBDEVICE.replace("out = torch.empty_like(x)",
                                                      "out = torch.empty_like(x)\n        libdevice.exp"),
                                   "T1.python.native_access"),
    "libdevice_dunder": (_LIBDEVICE.replace("x * tl.sigmoid(x)", "x * libdevice.__dict__"), "T1.python.reflection"),
    "extra_beside_libdevice": (HONEST.replace(_IMPORT, _IMPORT + "from triton.language.extra import libdevice, cuda\n"),
                               "T1.python.native_access"),
    "os_named_libdevice": (HONEST.replace(_IMPORT, _IMPORT + "import os as libdevice\n").replace(
        "x * tl.sigmoid(x)", "x / (1.0 + libdevice.exp(-x))"), "T1.python.import_not_allowed"),
    "default_a_function_not_a_dtype": (HONEST.replace("BLOCK: tl.constexpr)", "BLOCK: tl.constexpr, DT=tl.load)"),
                                       "T12.python.state_in_forward"),
})

