"""The explicit allowlists behind the ``model_new.py`` checker (``python_ast``).

Everything here is what an honest ``ModelNew.forward`` needs: call the
extension, allocate outputs, read shapes and other metadata, take views, do
arithmetic on Python numbers. Anything not listed is refused; the lists are
data so a reviewer can read them in one sitting.
"""

from __future__ import annotations

#: Extension module name(s) the harness builds (``cuda_extension`` on both backends).
DEFAULT_EXTENSION_NAMES: tuple[str, ...] = ("cuda_extension",)

#: Modules model_new.py may import (the module itself; names imported from torch are checked separately).
ALLOWED_IMPORTS: frozenset[str] = frozenset(
    {"torch", "torch.nn", "torch.nn.functional", "math", "typing", "__future__", "collections.abc", "typing_extensions"}
)

#: Refused modules by rule: the first prefix that matches names the rule.
IMPORT_RULES: tuple[tuple[str, str], ...] = (
    ("model", "T3.python.import_task"),
    ("importlib", "T1.python.dynamic_code"),
    ("builtins", "T1.python.dynamic_code"),
    ("runpy", "T1.python.dynamic_code"),
    ("imp", "T1.python.dynamic_code"),
    ("pkgutil", "T1.python.dynamic_code"),
    ("zipimport", "T1.python.dynamic_code"),
    ("codeop", "T1.python.dynamic_code"),
    ("torch.utils.cpp_extension", "T1.python.dynamic_code"),
    ("torch.jit", "T1.python.dynamic_code"),
    ("torch.fx", "T1.python.dynamic_code"),
    ("torch.library", "T1.python.dynamic_code"),
    ("torch.export", "T1.python.dynamic_code"),
    ("torch.compiler", "T1.python.dynamic_code"),
    ("ctypes", "T1.python.native_access"),
    ("_ctypes", "T1.python.native_access"),
    ("cffi", "T1.python.native_access"),
    ("contextlib", "T2.python.suppress_fallback"),
    ("gc", "T6.python.introspection"),
    ("inspect", "T6.python.introspection"),
    ("traceback", "T6.python.introspection"),
    ("sys", "T6.python.introspection"),
    ("dis", "T6.python.introspection"),
    ("code", "T6.python.introspection"),
    ("pdb", "T6.python.introspection"),
    ("weakref", "T6.python.introspection"),
    ("time", "T8.python.timer_access"),
    ("timeit", "T8.python.timer_access"),
    ("statistics", "T8.python.timer_access"),
    ("threading", "T10.python.thread"),
    ("_thread", "T10.python.thread"),
    ("multiprocessing", "T10.python.thread"),
    ("concurrent", "T10.python.thread"),
    ("asyncio", "T10.python.thread"),
    ("torch.multiprocessing", "T10.python.thread"),
    ("pickle", "T12.python.file_io"),
    ("io", "T12.python.file_io"),
    ("pathlib", "T12.python.file_io"),
    ("tempfile", "T12.python.file_io"),
    ("json", "T12.python.file_io"),
    ("shelve", "T12.python.file_io"),
    ("marshal", "T12.python.file_io"),
    ("glob", "T12.python.file_io"),
    ("functools", "T12.python.state_in_forward"),
    ("os", "T23.python.process_access"),
    ("subprocess", "T23.python.process_access"),
    ("socket", "T23.python.process_access"),
    ("signal", "T23.python.process_access"),
    ("shutil", "T23.python.process_access"),
    ("resource", "T23.python.process_access"),
    ("mmap", "T23.python.process_access"),
    ("urllib", "T23.python.process_access"),
    ("http", "T23.python.process_access"),
    ("requests", "T23.python.process_access"),
    ("pty", "T23.python.process_access"),
    ("fcntl", "T23.python.process_access"),
    ("posix", "T23.python.process_access"),
)

#: Names that may be imported with ``from torch import <name>``.
TORCH_IMPORTABLE: frozenset[str] = frozenset({"nn", "Tensor", "Size", "dtype", "device"})

#: torch attributes an honest forward may use: allocation.
TORCH_ALLOCATION: frozenset[str] = frozenset(
    {
        "torch.empty", "torch.empty_like", "torch.empty_strided", "torch.zeros", "torch.zeros_like",
        "torch.ones", "torch.ones_like", "torch.full", "torch.full_like",
    }
)

#: torch dtypes, layouts, memory formats and types (metadata values).
TORCH_CONSTANTS: frozenset[str] = frozenset(
    "torch." + n
    for n in (
        "float32 float float64 double float16 half bfloat16 int8 int16 short int32 int int64 long uint8 uint16 "
        "uint32 uint64 bool complex64 complex128 cfloat cdouble float8_e4m3fn float8_e5m2 float8_e4m3fnuz "
        "float8_e5m2fnuz dtype Tensor Size device strided layout memory_format contiguous_format channels_last "
        "channels_last_3d preserve_format"
    ).split()
)

#: torch functions returning metadata, or harmless context managers / syncs.
TORCH_METADATA_FUNCS: frozenset[str] = frozenset(
    {
        "torch.is_tensor", "torch.is_floating_point", "torch.is_complex", "torch.numel", "torch.finfo",
        "torch.iinfo", "torch.get_default_dtype", "torch.promote_types", "torch.result_type", "torch.no_grad",
        "torch.inference_mode", "torch.is_grad_enabled", "torch.is_inference_mode_enabled",
        "torch.cuda.is_available", "torch.cuda.current_device", "torch.cuda.device_count",
        "torch.cuda.current_stream", "torch.cuda.default_stream", "torch.cuda.synchronize", "torch.cuda.device",
        "torch.cuda.get_device_properties", "torch.cuda.get_device_capability", "torch.cuda.get_device_name",
        "torch.cuda.device_of", "torch.enable_grad", "torch.nn.Module", "torch.nn.Parameter",
    }
)

#: Context managers allowed around forward code (they cannot swallow exceptions).
TORCH_CONTEXT_MANAGERS: frozenset[str] = frozenset(
    {"torch.no_grad", "torch.inference_mode", "torch.enable_grad", "torch.cuda.device", "torch.cuda.device_of",
     "torch.device"}
)

#: Path prefixes refused everywhere (also in ``__init__``), with their rule.
TORCH_REFUSED_PREFIXES: tuple[tuple[str, str], ...] = (
    # Symbolic numbers hold a Python node whose methods libtorch and pybind11's casters call implicitly (guard_int,
    # int_ ...): session 37's red team ran torch compute in them, out of reach of the call rules (graded correct).
    ("torch.SymInt", "T1.python.dynamic_code"),
    ("torch.SymFloat", "T1.python.dynamic_code"),
    ("torch.SymBool", "T1.python.dynamic_code"),
    ("torch.sym_", "T1.python.dynamic_code"),
    ("torch.fx", "T1.python.dynamic_code"),
    ("torch.ops", "T1.python.private_torch"),
    ("torch.classes", "T1.python.private_torch"),
    ("torch.backends", "T16.python.global_flag"),
    ("torch.set_", "T16.python.global_flag"),
    ("torch.autograd.set_grad_enabled", "T16.python.global_flag"),
    ("torch.use_deterministic_algorithms", "T16.python.global_flag"),
    ("torch.manual_seed", "T16.python.global_flag"),
    ("torch.seed", "T16.python.global_flag"),
    ("torch.random", "T16.python.global_flag"),
    ("torch.cuda.manual_seed", "T16.python.global_flag"),
    ("torch.cuda.set_", "T16.python.global_flag"),
    ("torch.cuda.memory", "T16.python.global_flag"),
    ("torch.cuda.empty_cache", "T16.python.global_flag"),
    ("torch.cuda.Stream", "T9.python.stream"),
    ("torch.cuda.stream", "T9.python.stream"),
    ("torch.cuda.ExternalStream", "T9.python.stream"),
    ("torch.cuda.StreamContext", "T9.python.stream"),
    ("torch.cuda.Event", "T9.python.stream"),
    ("torch.cuda.graph", "T9.python.stream"),
    ("torch.cuda.CUDAGraph", "T9.python.stream"),
    ("torch.cuda.make_graphed_callables", "T9.python.stream"),
    ("torch.Stream", "T9.python.stream"),
    ("torch.Event", "T9.python.stream"),
    ("torch.save", "T12.python.file_io"),
    ("torch.load", "T12.python.file_io"),
    ("torch.from_file", "T12.python.file_io"),
    ("torch.serialization", "T12.python.file_io"),
    ("torch.hub", "T12.python.file_io"),
    ("torch.compile", "T1.python.dynamic_code"),
    ("torch.jit", "T1.python.dynamic_code"),
    ("torch.utils.cpp_extension", "T1.python.dynamic_code"),
    ("torch.fx", "T1.python.dynamic_code"),
    ("torch.export", "T1.python.dynamic_code"),
    ("torch.library", "T1.python.dynamic_code"),
    ("torch.compiler", "T1.python.dynamic_code"),
    ("torch.package", "T1.python.dynamic_code"),
    ("torch.overrides", "T11.python.tensor_subclass"),
    ("torch.autocast", "T15.python.dtype_cast"),
    ("torch.amp", "T15.python.dtype_cast"),
    ("torch.cuda.amp", "T15.python.dtype_cast"),
    ("torch.cpu.amp", "T15.python.dtype_cast"),
    ("torch.multiprocessing", "T10.python.thread"),
    ("torch.distributed", "T23.python.process_access"),
    ("torch.testing", "T7.python.monkeypatch"),
    ("torch.allclose", "T7.python.monkeypatch"),
    ("torch.profiler", "T8.python.timer_access"),
    ("torch.autograd.profiler", "T8.python.timer_access"),
)

#: Tensor methods returning metadata (numbers, shapes, flags).
TENSOR_METADATA_METHODS: frozenset[str] = frozenset(
    {
        "size", "stride", "dim", "ndimension", "numel", "nelement", "element_size", "is_contiguous",
        "data_ptr", "storage_offset", "get_device", "is_floating_point", "is_complex", "is_signed",
    }
)

#: Tensor methods that only make views or allocate/copy memory (no arithmetic).
TENSOR_VIEW_METHODS: frozenset[str] = frozenset(
    {
        "contiguous", "view", "view_as", "reshape", "reshape_as", "flatten", "unflatten", "unsqueeze",
        "squeeze", "permute", "transpose", "t", "expand", "expand_as", "narrow", "select", "unbind", "split",
        "chunk", "movedim", "moveaxis", "swapaxes", "swapdims", "as_strided", "detach", "unfold",
        "clone", "cuda", "cpu", "to", "new_empty", "new_empty_strided", "new_zeros", "new_ones", "new_full",
        "copy_", "zero_", "fill_",
    }
)

#: In-place methods from the list above: refused when the receiver is an input (T5).
TENSOR_INPLACE_METHODS: frozenset[str] = frozenset({"copy_", "zero_", "fill_"})

#: Tensor casts: refused in forward (T15, silent precision drop).
TENSOR_CAST_METHODS: frozenset[str] = frozenset(
    {"half", "float", "double", "bfloat16", "int", "long", "short", "char", "byte", "bool", "type", "type_as"}
)

#: Tensor attributes that are metadata (not compute).
TENSOR_METADATA_ATTRS: frozenset[str] = frozenset(
    {"shape", "dtype", "device", "ndim", "is_cuda", "is_cpu", "layout", "requires_grad", "is_sparse",
     "is_quantized", "itemsize", "nbytes", "is_leaf", "names"}
)

#: Tensor attributes that are views.
TENSOR_VIEW_ATTRS: frozenset[str] = frozenset({"T", "mT", "data", "real", "imag"})

#: Builtins allowed in forward with any (non-compute) arguments.
BUILTINS_ALLOWED: frozenset[str] = frozenset(
    {
        "len", "range", "isinstance", "issubclass", "tuple", "list", "dict", "enumerate", "zip", "reversed",
        "str", "type", "callable", "iter", "next", "map", "filter", "hasattr", "slice", "any", "all", "repr",
        "ValueError", "TypeError", "RuntimeError", "AssertionError", "NotImplementedError", "IndexError",
        "KeyError", "Exception",
    }
)

#: Builtins allowed only on Python numbers (on a tensor they run PyTorch compute).
BUILTINS_NUMERIC: frozenset[str] = frozenset(
    {"int", "float", "bool", "abs", "min", "max", "round", "divmod", "pow", "sum", "sorted"}
)

#: Builtins refused with a specific rule.
BUILTIN_RULES: dict[str, str] = {
    "eval": "T1.python.dynamic_code",
    "exec": "T1.python.dynamic_code",
    "compile": "T1.python.dynamic_code",
    "__import__": "T1.python.dynamic_code",
    "breakpoint": "T1.python.dynamic_code",
    "globals": "T1.python.reflection",
    "locals": "T1.python.reflection",
    "vars": "T1.python.reflection",
    "dir": "T1.python.reflection",
    "getattr": "T1.python.reflection",
    "setattr": "T12.python.state_in_forward",
    "delattr": "T12.python.state_in_forward",
    "object": "T1.python.reflection",
    "super": "T1.python.reflection",
    "open": "T12.python.file_io",
    "input": "T23.python.process_access",
    "id": "T12.python.cache_key",
    "hash": "T12.python.cache_key",
    "memoryview": "T1.python.reflection",
}

#: nn.Module methods ModelNew must not override (the harness calls them).
MODULE_MACHINERY: frozenset[str] = frozenset(
    {
        "__call__", "_call_impl", "_wrapped_call_impl", "__getattr__", "__getattribute__", "__setattr__",
        "__delattr__", "__new__", "__init_subclass__", "__del__", "__reduce__", "__reduce_ex__", "__setstate__",
        "__getstate__", "__class_getitem__", "__instancecheck__", "__eq__", "__hash__", "__bool__", "__len__",
        "__iter__", "__dir__", "state_dict", "load_state_dict", "_load_from_state_dict", "to", "cuda", "cpu",
        "eval", "train", "apply", "_apply", "parameters", "named_parameters", "buffers", "named_buffers",
        "modules", "named_modules", "children", "register_forward_hook", "register_forward_pre_hook",
        "half", "float", "double", "type", "zero_grad", "requires_grad_", "share_memory",
        "__torch_function__", "__torch_dispatch__",
    }
)

#: Configuration attributes of torch.nn modules (numbers, tuples, strings): metadata where a parameter annotated as
#: a module (``conv: nn.Conv2d``) is read; any other attribute of it counts as a tensor.
MODULE_CONFIG_ATTRS: frozenset[str] = frozenset(
    """in_features out_features in_channels out_channels kernel_size stride padding dilation groups output_padding
    padding_mode eps momentum affine track_running_stats num_features normalized_shape elementwise_affine
    num_groups num_channels negative_slope inplace p dim min_val max_val alpha beta threshold lambd
    num_embeddings embedding_dim padding_idx hidden_size num_layers input_size bidirectional batch_first
    upscale_factor scale_factor mode align_corners ceil_mode count_include_pad divisor_override output_size
    approximate training""".split()
)

#: Base classes a helper class may use (the nn.Module family and autograd.Function).
ALLOWED_BASES: frozenset[str] = frozenset({"torch.nn.Module", "torch.autograd.Function", "object"})

#: Decorators allowed on functions and methods.
ALLOWED_DECORATORS: frozenset[str] = frozenset(
    # not ``property``: a property's body runs on an attribute read, which the call rules do not follow (session 37's
    # red team ran torch compute in a helper's property, graded correct)
    {"staticmethod", "classmethod", "torch.no_grad", "torch.inference_mode"}
)

#: Methods/attributes allowed on the ``ctx`` argument of an autograd.Function.
AUTOGRAD_CTX_ATTRS: frozenset[str] = frozenset(
    {"save_for_backward", "saved_tensors", "mark_non_differentiable", "set_materialize_grads", "needs_input_grad"}
)

#: Methods allowed on a local Python list.
LIST_METHODS: frozenset[str] = frozenset({"append", "extend", "pop", "insert", "index", "count"})
