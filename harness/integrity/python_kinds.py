"""Shared vocabulary of the ``model_new.py`` checker: expression kinds, class facts, small AST predicates.

Every expression gets a kind ``(tag, ref)``: ``S`` a Python number, ``M``
metadata (shapes, dtypes, devices, strings), ``T`` a tensor, ``U`` unknown
(treated as a tensor), ``P`` a data pointer, or a tag naming what a name is
bound to (``"ext"``, ``"torchfn"``, ``"tmodule"`` for a torch.nn submodule,
``"hmodule"`` for a helper module of the file, ``"X"`` for something already
reported).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from cuda_agent.harness.integrity import python_allowlist as allow

S, M, T, U, P = "S", "M", "T", "U", "P"  # scalar, metadata, tensor, unknown, data pointer
NON_COMPUTE = {S, M, P, "list", "builtin"}
CALLABLE_TAGS = {"torchfn", "helperfn", "method", "tmodule", "hmodule", "lambda", "mod", "extfn", "helpercls", "mathfn"}
TIMER_PATHS = ("torch.cuda.Event", "torch.cuda.synchronize", "torch.cuda.Stream", "torch.profiler",
                "torch.autograd.profiler", "torch.cuda.current_stream", "torch.cuda.Event.elapsed_time")
METHOD_RECEIVERS = {T, U, M, S, P, "list", "container", "ctx", "tmodule", "X", "stream"}
MUTATING_CONTAINER_METHODS = {"append", "extend", "insert", "pop", "update", "setdefault", "clear", "add", "remove",
                               "popitem", "discard", "__setitem__"}


def make_kind(tag: str, ref: str | None = None) -> tuple[str, str | None]:
    return (tag, ref)


@dataclass
class ClassInfo:
    """What the module scan learned about one class definition."""

    name: str
    node: ast.ClassDef
    kind: str  # "modelnew" | "module" | "function" | "other"
    methods: dict[str, ast.FunctionDef] = field(default_factory=dict)
    attrs: dict[str, tuple[str, str | None]] = field(default_factory=dict)


def is_super_init(node: ast.Attribute) -> bool:
    return (node.attr == "__init__" and isinstance(node.value, ast.Call) and isinstance(node.value.func, ast.Name)
            and node.value.func.id == "super")


def is_static(fn: ast.FunctionDef) -> bool:
    """Whether ``fn`` is decorated ``@staticmethod`` (no ``self``: its first parameter is an argument)."""
    return any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in fn.decorator_list)


#: ``math`` members that are numbers, not functions (``math.sqrt(2.0 / math.pi)``).
MATH_CONSTANTS = frozenset({"math.pi", "math.e", "math.tau", "math.inf", "math.nan"})


def number_annotation(annotation: ast.AST | None) -> bool:
    """``int``, ``float`` or ``bool`` (a parameter annotated as a Python number)."""
    return isinstance(annotation, ast.Name) and annotation.id in {"int", "float", "bool"}


def is_main_guard(test: ast.AST) -> bool:
    return (isinstance(test, ast.Compare) and isinstance(test.left, ast.Name) and test.left.id == "__name__"
            and len(test.comparators) == 1 and isinstance(test.comparators[0], ast.Constant)
            and test.comparators[0].value == "__main__")


def try_only_reraises(node: ast.AST) -> bool:
    """True when every handler only raises and there is no else/finally: no fallback path exists."""
    if getattr(node, "orelse", None) or getattr(node, "finalbody", None):
        return False
    handlers = getattr(node, "handlers", [])
    return bool(handlers) and all(all(isinstance(s, ast.Raise) for s in h.body) for h in handlers)


def _module_prefixes() -> frozenset[str]:
    out: set[str] = set()
    for path in allow.TORCH_ALLOCATION | allow.TORCH_CONSTANTS | allow.TORCH_METADATA_FUNCS:
        parts = path.split(".")
        for i in range(1, len(parts)):
            out.add(".".join(parts[:i]))
    out.add("torch.nn.functional")  # the module object itself; any attribute of it is refused
    out.add("torch.nn.init")
    return frozenset(out)


TORCH_MODULE_PREFIXES = _module_prefixes()


def submodule_param(cls: ClassInfo, method: str, index: int, name: str) -> str:
    """The torch.nn class of parameter ``name`` (position ``index`` after ``self``) of ModelNew's ``method`` when
    every use of the method in the class is a call ``self.<method>(...)`` passing ``self.<attr>`` there, with
    ``self.<attr>`` a torch.nn submodule (``def conv_relu(self, x, conv)`` called as ``self.conv_relu(x,
    self.conv)``); else ''. A call that passes anything else (a tensor, a splat, the default) or a use of the method
    other than a call (``map(self.conv_relu, ...)``) proves nothing."""
    calls = [n for n in ast.walk(cls.node) if isinstance(n, ast.Call)]
    funcs = {id(c.func) for c in calls}
    uses = [n for n in ast.walk(cls.node) if isinstance(n, ast.Attribute) and n.attr == method
            and isinstance(n.value, ast.Name) and n.value.id == "self"]
    if not uses or any(id(u) not in funcs for u in uses):
        return ""
    paths = set()
    for c in calls:
        if id(c.func) not in {id(u) for u in uses}:
            continue
        if any(isinstance(a, ast.Starred) for a in c.args) or any(k.arg is None for k in c.keywords):
            return ""
        given = [k.value for k in c.keywords if k.arg == name]
        if index < len(c.args):
            given.append(c.args[index])
        if len(given) != 1:
            return ""
        a = given[0]
        if not (isinstance(a, ast.Attribute) and isinstance(a.value, ast.Name) and a.value.id == "self"):
            return ""
        kind = cls.attrs.get(a.attr)
        if kind is None or kind[0] != "tmodule" or not (kind[1] or "").startswith("torch.nn."):
            return ""
        paths.add(kind[1])
    return paths.pop() if len(paths) == 1 else "torch.nn.Module" if paths else ""
