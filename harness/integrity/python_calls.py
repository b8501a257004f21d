"""Call rules of the ``model_new.py`` checker: what forward may call (extension, allocation, metadata, views).

A mixin of ``python_function.FunctionChecker``: one method per callee family
(the extension, torch functions, builtins, methods on tensors and other
receivers, ``getattr`` with a literal name).
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Any

from cuda_agent.harness.integrity import python_allowlist as allow
from cuda_agent.harness.integrity.python_kinds import (
    CALLABLE_TAGS,
    M,
    METHOD_RECEIVERS,
    MUTATING_CONTAINER_METHODS,
    NON_COMPUTE,
    P,
    S,
    T,
    U,
    is_static,
    make_kind,
    number_annotation,
)

if TYPE_CHECKING:
    from cuda_agent.harness.integrity.python_ast import _Checker
    from cuda_agent.harness.integrity.python_kinds import ClassInfo


class CallChecks:
    """Checks of call expressions; mixed into ``FunctionChecker``."""

    top: _Checker
    mode: str
    cls: ClassInfo | None
    env: dict[str, tuple[str, str | None]]
    ext_called: bool

    if TYPE_CHECKING:
        strict: bool

        def flag(self, rule: str, node: ast.AST, what: str) -> None: ...
        def expr(self, node: Any) -> tuple[str, str | None]: ...
        def attr_kind(self, node: ast.Attribute, recv: tuple[str, str | None]) -> tuple[str, str | None]: ...
        def root_is_input(self, node: ast.AST) -> bool: ...

    def e_Call(self, node: ast.Call) -> tuple[str, str | None]:
        func = node.func
        if isinstance(func, ast.Name) and func.id == "getattr" and func.id not in self.env:
            return self.call_getattr(node)
        recv: tuple[str, str | None] | None = None
        if isinstance(func, ast.Attribute) and self.top.path_of(func) is None:
            recv = self.expr(func.value)
            if recv[0] in METHOD_RECEIVERS:
                arg_kinds = [self.expr(a) for a in node.args] + [self.expr(k.value) for k in node.keywords]
                return self.call_method(node, func, recv, arg_kinds)
            fkind = self.attr_kind(func, recv)
        else:
            fkind = self.expr(func)
        tag, ref = fkind
        if tag == "builtin" and ref in {"isinstance", "issubclass"} and len(node.args) == 2 and not node.keywords \
                and self._torch_nn_classes(node.args[1]):
            self.expr(node.args[0])  # isinstance(layer, nn.Linear): a type check, no torch class is called
            return make_kind(M)
        arg_kinds = [self.expr(a) for a in node.args] + [self.expr(k.value) for k in node.keywords]
        if tag == "X":
            return make_kind("X")
        if tag == "extfn":
            self.ext_called = True
            for a, k in zip(list(node.args) + [kw.value for kw in node.keywords], arg_kinds, strict=True):
                # the extension itself too: a C++ function given its own module holds a Python object at call time
                if k[0] in CALLABLE_TAGS or k[0] == "ext":
                    self.flag("T1.python.submodule_call", a,
                              "passing modules or functions to the extension is not allowed; pass tensors and numbers")
            return make_kind(T)
        if tag == "torchfn":
            return self.call_torch(node, ref or "", arg_kinds)
        if tag == "mathfn":
            if self.strict and any(k[0] not in NON_COMPUTE for k in arg_kinds):
                self.flag("T1.python.operator", node, "math functions on tensors run PyTorch compute")
            return make_kind(S)
        if tag == "builtin":
            return self.call_builtin(node, ref or "", arg_kinds)
        if tag == "method":
            method = self.cls.methods.get(ref or "") if self.cls is not None else None
            if method is not None and self.strict:
                self.check_number_args(node, method, arg_kinds, skip=0 if is_static(method) else 1)
            self.top.reach(self.mode, self.cls.name if self.cls else None, ref or "")
            if self.mode == "forward":
                self.ext_called |= self.top.ext_called_in_forward
            return make_kind(U)
        if tag == "helperfn":
            fn = self.top.functions.get(ref or "")
            if fn is not None and self.strict:
                self.check_number_args(node, fn, arg_kinds)
            self.top.reach(self.mode, None, ref or "")
            return make_kind(U)
        if tag == "helpercls":
            info = self.top.classes.get(ref or "")
            if info is not None and info.kind == "module":
                self.top.reach(self.mode, ref, "__init__")
            return make_kind("hmodule", ref)
        if tag == "applyfn":
            self.top.reach(self.mode, ref, "forward")
            self.ext_called |= self.top.ext_called_in_forward
            return make_kind(U)
        if tag == "hmodule":
            self.top.reach(self.mode, ref, "forward")
            self.ext_called |= self.top.ext_called_in_forward
            return make_kind(U)
        if tag == "lambda":
            return make_kind(U)
        if tag == "tmodule":
            if self.strict:
                self.flag("T1.python.submodule_call", node,
                          "calling a torch.nn module runs PyTorch compute; pass its weights to the extension instead")
            return make_kind(T)
        if tag in {"ctxattr"}:
            return make_kind(U)
        if isinstance(func, ast.Attribute) and recv is not None:
            return self.call_method(node, func, recv, arg_kinds)
        if self.strict:
            self.flag("T1.python.submodule_call", node,
                      "forward may call only the extension, allowed torch allocation/metadata functions, "
                      "its own helpers and allowed builtins")
        return make_kind(U)

    def call_getattr(self, node: ast.Call) -> tuple[str, str | None]:
        if len(node.args) >= 2 and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str):
            name = node.args[1].value
            if not name.isidentifier():
                self.flag("T1.python.reflection", node, "getattr with a non-identifier name")
                return make_kind(U)
            synthetic = ast.Attribute(value=node.args[0], attr=name, ctx=ast.Load())
            ast.copy_location(synthetic, node)
            synthetic.end_lineno, synthetic.end_col_offset = node.end_lineno, node.end_col_offset
            if name.startswith("__"):
                self.flag("T1.python.reflection", node, f"getattr of dunder `{name}` is not allowed")
                return make_kind(U)
            for extra in node.args[2:]:
                self.expr(extra)
            return self.e_Attribute(synthetic)
        self.flag("T1.python.reflection", node,
                  "getattr with a computed name hides what is called; write the attribute name literally")
        for a in node.args:
            self.expr(a)
        return make_kind("X")

    def call_torch(self, node: ast.Call, path: str, arg_kinds: list[tuple[str, str | None]]) -> tuple[str, str | None]:
        if self.mode == "init":
            if path.startswith("torch.nn.") and path.split(".")[2][:1].isupper() and path != "torch.nn.Parameter":
                return make_kind("tmodule", path)
            return make_kind(T)
        if path in allow.TORCH_ALLOCATION:
            return make_kind(T)
        if path in {"torch.cuda.current_device", "torch.cuda.device_count", "torch.numel"}:
            return make_kind(S)
        if path in {"torch.cuda.current_stream", "torch.cuda.default_stream"}:
            return make_kind("stream")
        if path == "torch.nn.Parameter" or path == "torch.nn.Module":
            self.flag("T12.python.state_in_forward", node, f"`{path}` in forward is not allowed")
            return make_kind(T)
        return make_kind(M)

    def _torch_nn_classes(self, node: ast.AST) -> bool:
        """``node`` names torch.nn module classes only (``nn.Linear``, ``(nn.Linear, nn.ReLU)``)."""
        parts = node.elts if isinstance(node, ast.Tuple) else [node]
        paths = [self.top.path_of(p) for p in parts]
        return bool(paths) and all(p is not None and p.startswith("torch.nn.") and p.split(".")[-1][:1].isupper()
                                   and not p.split(".")[-1].startswith("_") for p in paths)

    def call_builtin(self, node: ast.Call, name: str, arg_kinds: list[tuple[str, str | None]]) -> tuple[str, str | None]:
        if name in allow.BUILTIN_RULES:
            rule = allow.BUILTIN_RULES[name]
            if name == "super" and not self.strict:
                return make_kind("self")
            if name == "setattr" and not self.strict and node.args and isinstance(node.args[0], ast.Name) \
                    and self.env.get(node.args[0].id, make_kind(U))[0] == "self" and len(node.args) > 1 \
                    and isinstance(node.args[1], ast.Constant) and node.args[1].value != "forward" \
                    and node.args[1].value not in allow.MODULE_MACHINERY:
                return make_kind(M)
            if rule == "T12.python.state_in_forward" and not self.strict:
                rule = "T1.python.reflection"
            if rule == "T12.python.cache_key" and not self.strict:
                return make_kind(S)
            self.flag(rule, node, f"`{name}()` is not allowed")
            return make_kind(U)
        if name in allow.BUILTINS_NUMERIC:
            if self.strict and any(k[0] not in NON_COMPUTE or k == ("list", T) for k in arg_kinds):
                self.flag("T1.python.builtin_call", node,
                          f"`{name}()` on a tensor runs PyTorch compute; use it on Python numbers only")
            return make_kind(S) if name not in {"sorted"} else make_kind("list")
        if self.strict and name in {"map", "filter", "iter", "sorted", "min", "max"}:
            # map(self.act, xs), filter(F.relu, xs), iter(self.act, x), max(xs, key=...): the builtin calls it
            called = [(node.args[0], arg_kinds[0])] if name in {"map", "filter"} and node.args else []
            called += [(node.args[0], arg_kinds[0])] if name == "iter" and len(node.args) == 2 else []
            called += [(kw.value, arg_kinds[len(node.args) + i]) for i, kw in enumerate(node.keywords) if kw.arg == "key"]
            for a, k in called:
                if k[0] in CALLABLE_TAGS - {"extfn", "lambda"}:
                    self.flag("T1.python.submodule_call", a, f"passing a module or function to `{name}()` calls it; "
                              "forward may call only the extension, allowed torch allocation/metadata functions and "
                              "its own helpers directly")
        if name in allow.BUILTINS_ALLOWED:
            if name == "len":
                return make_kind(S)
            if name == "type":
                return make_kind(U)  # a class: calling its methods would compute
            if name in {"list", "tuple"} and len(arg_kinds) == 1 and arg_kinds[0][0] == "tmodule":
                return arg_kinds[0]  # list(self.network): the same submodules (calling one is still refused)
            if name == "list" and len(arg_kinds) == 1 and arg_kinds[0][0] in {S, M} and not node.keywords:
                return make_kind("list", M)  # list(x.shape): numbers
            if name in {"list", "tuple", "dict", "enumerate", "zip", "map", "filter", "reversed"}:
                return make_kind("list") if name != "tuple" or any(k[0] not in {S, M} for k in arg_kinds) else make_kind(M)
            return make_kind(M)
        if self.strict:
            self.flag("T1.python.builtin_call", node,
                      f"`{name}()` is not on the builtin allowlist ({', '.join(sorted(allow.BUILTINS_ALLOWED))})")
        return make_kind(U)

    def call_method(self, node: ast.Call, func: ast.Attribute, recv: tuple[str, str | None],
                    arg_kinds: list[tuple[str, str | None]]) -> tuple[str, str | None]:
        name = func.attr
        tag = recv[0]
        if name.startswith("register_") and ("hook" in name or "parametrization" in name):
            self.flag("T7.python.module_override", node,
                      f"`.{name}()` installs code that runs around forward (it can replace the output); not allowed")
            return make_kind("X")
        if tag == "X" or name.startswith("__"):
            return make_kind("X")
        if tag == "self":
            if name in {"register_buffer", "register_parameter", "add_module", "register_module"}:
                if self.strict:
                    self.flag("T12.python.state_in_forward", node, f"self.{name}() in forward stores state")
                return make_kind(M)
            if self.strict:
                self.flag("T1.python.submodule_call", node, f"self.{name}(...) is not a method of this class")
            return make_kind(U)
        if tag == "tmodule":
            if self.strict:
                self.flag("T1.python.submodule_call", node,
                          "calling a torch.nn module runs PyTorch compute; pass its weights to the extension instead")
            return make_kind(T)
        if tag == "container":
            if name in MUTATING_CONTAINER_METHODS:
                self.flag("T12.python.state_in_forward", node, "mutating a module-level container keeps state across calls")
            return make_kind(U)
        if tag == "list":
            if self.strict and name not in allow.LIST_METHODS:
                self.flag("T1.python.tensor_method", node, f"list method `.{name}()` is not allowed")
            return make_kind(U)
        if tag in {M, S, P}:
            if self.strict and name.startswith("_"):
                self.flag("T1.python.reflection", node, "private methods are not allowed")
            return make_kind(S) if name in {"numel", "bit_length", "index", "count"} else make_kind(M)
        if tag == "stream":
            self.flag("T9.python.stream", node, f"stream.{name}() is not allowed; pass .cuda_stream to the extension")
            return make_kind("X")
        if tag == "ctx" and name in allow.AUTOGRAD_CTX_ATTRS:
            return make_kind(M)
        if tag in {T, U}:
            return self.tensor_method(node, func, name, arg_kinds)
        if self.strict:
            self.flag("T1.python.submodule_call", node, f"calling `.{name}()` on this object is not allowed")
        return make_kind(U)

    def tensor_method(self, node: ast.Call, func: ast.Attribute, name: str,
                      arg_kinds: list[tuple[str, str | None]]) -> tuple[str, str | None]:
        root_input = self.root_is_input(func.value)
        if root_input and name.endswith("_") and not name.endswith("__"):
            self.flag("T5.python.input_mutation", node, f"`.{name}()` modifies an input in place")
            return make_kind(T)
        if not self.strict:
            return make_kind(T)
        if name in allow.TENSOR_METADATA_METHODS:
            if name == "data_ptr":
                return make_kind(P)
            if name in {"size", "stride"} and not node.args:
                return make_kind(M)
            return make_kind(M) if name.startswith("is_") else make_kind(S)
        if name == "float" and not node.args and not node.keywords:
            return make_kind(T)  # to float32: a no-op on float32 inputs; a real narrowing is T15.runtime.dtype_cast
        if name in allow.TENSOR_CAST_METHODS:
            self.flag("T15.python.dtype_cast", node, "casting tensors in forward changes the computed precision")
            return make_kind(T)
        if name == "to":
            if self.to_float32(node):
                return make_kind(T)  # .to(torch.float32), as .float()
            if self.to_casts(node, arg_kinds):
                self.flag("T15.python.dtype_cast", node, "`.to(dtype)` in forward changes the computed precision; "
                          "only device moves are allowed")
            return make_kind(T)
        if name in allow.TENSOR_VIEW_METHODS:
            return make_kind("list") if name in {"unbind", "split", "chunk"} else make_kind(T)
        rule = "T1.python.private_torch" if name.startswith("_") else "T1.python.tensor_method"
        self.flag(rule, node, f"tensor method `.{name}()` computes with PyTorch; allowed methods: metadata "
                  f"({', '.join(sorted(allow.TENSOR_METADATA_METHODS))}) and views/allocation "
                  f"({', '.join(sorted(allow.TENSOR_VIEW_METHODS))})")
        return make_kind(T)

    def check_number_args(self, node: ast.Call, fn: ast.FunctionDef, arg_kinds: list[tuple[str, str | None]],
                          skip: int = 0) -> None:
        """A module-level helper's parameters annotated ``int``/``float``/``bool`` are numbers in its body
        (``python_function.number_annotation``): every call from forward must pass numbers there."""
        params = (fn.args.posonlyargs + fn.args.args)[skip:]
        numbers = {a.arg for a in params + fn.args.kwonlyargs if number_annotation(a.annotation)}
        if not numbers:
            return
        passed: list[tuple[str | None, ast.AST, tuple[str, str | None]]] = []
        for i, (a, k) in enumerate(zip(node.args, arg_kinds, strict=False)):
            passed.append((params[i].arg if i < len(params) and not isinstance(a, ast.Starred) else None, a, k))
        for kw, k in zip(node.keywords, arg_kinds[len(node.args):], strict=False):
            passed.append((kw.arg, kw.value, k))
        for name, a, k in passed:
            if (name is None or name in numbers) and k[0] not in {S, M}:
                self.flag("T1.python.operator", a, f"`{fn.name}` takes a number here (annotated int/float/bool) and "
                          "computes with it as one; pass a Python number, not a tensor")

    def to_float32(self, node: ast.Call) -> bool:
        """``.to(torch.float32)`` / ``.to(dtype=torch.float)`` (nothing else): judged at run time, as ``.float()``."""
        given = list(node.args) + [k.value for k in node.keywords if k.arg == "dtype"]
        others = [k for k in node.keywords if k.arg not in {"dtype", "non_blocking", "copy"}]
        return len(given) == 1 and not others and self.top.path_of(given[0]) in {"torch.float32", "torch.float"}

    def to_casts(self, node: ast.Call, arg_kinds: list[tuple[str, str | None]]) -> bool:
        if any(k.arg == "dtype" for k in node.keywords):
            return True
        for a in node.args:
            if isinstance(a, ast.Attribute) and a.attr == "dtype":
                return True
            path = self.top.path_of(a)
            if path in allow.TORCH_CONSTANTS and path not in {"torch.device", "torch.contiguous_format",
                                                               "torch.channels_last", "torch.preserve_format"}:
                return True
            if isinstance(a, ast.Name) and self.env.get(a.id, make_kind(U))[0] in {T, U} and a.id not in {"device"}:
                return True
        return False
