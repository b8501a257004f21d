"""Canonical form of a KernelBench-format task module, for similarity checks.

:func:`statement_tokens` turns a module into a list of normalised statements
(one string each), invariant under:

- **renaming**: every identifier that is not an API name (``torch``, ``nn``,
  ``F``, builtins, ``Model``/``forward``/``get_inputs``...) becomes ``v<k>``,
  numbered by first use in a fixed visiting order (``forward`` first, then
  ``__init__``, other methods, ``get_inputs``, ``get_init_inputs``, module
  sizes) -- so the order of parameters in a signature does not matter;
  ``self.<attr>`` attributes are renamed the same way;
- **argument order**: keyword arguments are sorted by name; operands of
  commutative operators (``+ * & | ^``, ``torch.add/mul/maximum/minimum``)
  are sorted by their identifier-blind shape; signature parameters, module
  sizes and the elements of ``get_init_inputs()``'s list are sorted;
- **constants**: numeric literals (with their sign) become ``<num>`` (values dropped);
  strings and booleans are kept (``mode='bilinear'`` changes the operator).

Calls of submodules (``self.conv(x)``) carry the type that built them in
``__init__`` (``self.v1<nn.Conv2d>(v0)``), so ``forward`` statements name
their operators. Imports, docstrings, ``super().__init__()`` and module-level
size constants assigned a literal (and ``CPU_SIZES``, the same task at other
sizes) are dropped: they are the same in every task (up to names and values,
which are normalised away) and would only inflate similarity.
"""

from __future__ import annotations

import ast

#: Names kept verbatim (API identity, not user naming).
KEEP_NAMES: frozenset[str] = frozenset(
    {"torch", "nn", "F", "math", "self", "super", "Model", "forward", "get_inputs", "get_init_inputs", "__init__",
     "range", "len", "int", "float", "bool", "min", "max", "sum", "abs", "tuple", "list", "dict", "isinstance", "zip",
     "enumerate", "round", "pow", "print", "True", "False", "None"}
)

_COMMUTATIVE_OPS = (ast.Add, ast.Mult, ast.BitAnd, ast.BitOr, ast.BitXor)
_COMMUTATIVE_CALLS = frozenset({"torch.add", "torch.mul", "torch.maximum", "torch.minimum", "torch.max", "torch.min"})


def _dotted(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else None
    return None


class _Canon:
    """Renders nodes to canonical strings, assigning placeholders on first use."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}
        self.module_types: dict[str, str] = {}  # self attribute -> callee that built it in __init__

    def name(self, key: str, blind: bool) -> str:
        if blind:
            return "ID"
        if key not in self.names:
            self.names[key] = f"v{len(self.names)}"
        return self.names[key]

    def expr(self, node: ast.AST | None, blind: bool = False) -> str:
        """Canonical text of an expression; ``blind`` ignores identifiers (used as sort key)."""
        if node is None:
            return "None"
        if isinstance(node, ast.Name):
            return node.id if node.id in KEEP_NAMES else self.name(node.id, blind)
        if isinstance(node, ast.Constant):
            if isinstance(node.value, bool) or node.value is None or isinstance(node.value, str):
                return repr(node.value)
            return "<num>"
        if isinstance(node, ast.Attribute):
            if isinstance(node.value, ast.Name) and node.value.id == "self":
                return "self." + self.name("self." + node.attr, blind)
            return f"{self.expr(node.value, blind)}.{node.attr}"
        if isinstance(node, ast.BinOp):
            parts = [node.left, node.right]
            if isinstance(node.op, _COMMUTATIVE_OPS):
                parts.sort(key=lambda n: self.expr(n, True))
            return f"({self.expr(parts[0], blind)} {type(node.op).__name__} {self.expr(parts[1], blind)})"
        if isinstance(node, ast.UnaryOp):
            if isinstance(node.op, (ast.USub, ast.UAdd)) and isinstance(node.operand, ast.Constant) and isinstance(
                node.operand.value, (int, float)
            ) and not isinstance(node.operand.value, bool):
                return "<num>"  # a signed literal is a constant like any other
            return f"{type(node.op).__name__}({self.expr(node.operand, blind)})"
        if isinstance(node, ast.Call):
            func = self.expr(node.func, blind)
            if isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name) and node.func.value.id == "self":
                func += f"<{self.module_types.get(node.func.attr, '?')}>"  # calling a submodule: name its type
            args = list(node.args)
            if _dotted(node.func) in _COMMUTATIVE_CALLS and len(args) == 2:
                args.sort(key=lambda n: self.expr(n, True))
            rendered = [self.expr(a, blind) for a in args]
            kws = sorted(node.keywords, key=lambda k: k.arg or "")
            rendered += [f"{k.arg}={self.expr(k.value, blind)}" for k in kws]
            return f"{func}({', '.join(rendered)})"
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            return f"{type(node).__name__}[{', '.join(self.expr(e, blind) for e in node.elts)}]"
        if isinstance(node, ast.Subscript):
            return f"{self.expr(node.value, blind)}[{self.expr(node.slice, blind)}]"
        if isinstance(node, ast.Slice):
            return f"{self.expr(node.lower, blind)}:{self.expr(node.upper, blind)}:{self.expr(node.step, blind)}"
        if isinstance(node, ast.Compare):
            return f"cmp({self.expr(node.left, blind)}, {[type(o).__name__ for o in node.ops]}, {', '.join(self.expr(c, blind) for c in node.comparators)})"
        if isinstance(node, ast.Starred):
            return f"*{self.expr(node.value, blind)}"
        if isinstance(node, ast.keyword):
            return f"{node.arg}={self.expr(node.value, blind)}"
        # Anything else: structure only, children canonicalised in order.
        children = [self.expr(c, blind) for c in ast.iter_child_nodes(node) if isinstance(c, ast.expr)]
        return f"{type(node).__name__}({', '.join(children)})"

    def stmt(self, node: ast.stmt, out: list[str], depth: int = 0) -> None:
        pad = "  " * depth
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return  # docstring
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) and _dotted(node.value.func) in (
            "super.__init__", None
        ) and isinstance(node.value.func, ast.Attribute) and isinstance(node.value.func.value, ast.Call):
            return  # super().__init__()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            return
        if isinstance(node, ast.Assign):
            targets = " = ".join(self.expr(t) for t in node.targets)
            out.append(f"{pad}{targets} = {self.expr(node.value)}")
        elif isinstance(node, ast.AugAssign):
            out.append(f"{pad}{self.expr(node.target)} {type(node.op).__name__}= {self.expr(node.value)}")
        elif isinstance(node, ast.AnnAssign):
            out.append(f"{pad}{self.expr(node.target)} = {self.expr(node.value)}")
        elif isinstance(node, ast.Return):
            out.append(f"{pad}return {self.expr(node.value)}")
        elif isinstance(node, ast.Expr):
            out.append(f"{pad}{self.expr(node.value)}")
        elif isinstance(node, (ast.If, ast.While)):
            out.append(f"{pad}{type(node).__name__} {self.expr(node.test)}")
            for s in node.body + node.orelse:
                self.stmt(s, out, depth + 1)
        elif isinstance(node, ast.For):
            out.append(f"{pad}for {self.expr(node.target)} in {self.expr(node.iter)}")
            for s in node.body + node.orelse:
                self.stmt(s, out, depth + 1)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            self.function(node, out, depth)
        elif isinstance(node, ast.ClassDef):
            self.klass(node, out, depth)
        else:
            out.append(f"{pad}{type(node).__name__}")

    def function(self, node: ast.FunctionDef | ast.AsyncFunctionDef, out: list[str], depth: int = 0) -> None:
        body: list[str] = []
        for s in node.body:
            self.stmt(s, body, depth + 1)
        if node.name == "get_init_inputs" and body and body[-1].lstrip().startswith("return List["):
            ret = node.body[-1]
            assert isinstance(ret, ast.Return) and isinstance(ret.value, ast.List)
            elts = sorted(self.expr(e) for e in ret.value.elts)
            body[-1] = "  " * (depth + 1) + f"return List[{', '.join(elts)}]"
        params = sorted(self.expr(ast.Name(id=a.arg)) for a in node.args.args)
        name = node.name if node.name in KEEP_NAMES else self.name(node.name, False)
        out.append("  " * depth + f"def {name}({', '.join(params)})")
        out.extend(body)

    def klass(self, node: ast.ClassDef, out: list[str], depth: int = 0) -> None:
        name = node.name if node.name in KEEP_NAMES else self.name(node.name, False)
        out.append("  " * depth + f"class {name}({', '.join(self.expr(b) for b in node.bases)})")
        methods = [s for s in node.body if isinstance(s, ast.FunctionDef)]
        for m in methods:
            for st in ast.walk(m):
                if isinstance(st, ast.Assign) and isinstance(st.value, ast.Call):
                    for t in st.targets:
                        if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
                            self.module_types[t.attr] = _dotted(st.value.func) or "?"
        order = {"forward": 0, "__init__": 1}
        for m in sorted(methods, key=lambda m: order.get(m.name, 2)):
            self.function(m, out, depth + 1)
        for s in node.body:
            if not isinstance(s, ast.FunctionDef):
                self.stmt(s, out, depth + 1)


#: Module-level names holding a size variant of the task (cuda_agent.harness.tasks), not program content.
_VARIANT_NAMES = frozenset({"CPU_SIZES"})


def _is_literal(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.UnaryOp):
        return _is_literal(node.operand)
    if isinstance(node, (ast.Tuple, ast.List)):
        return all(_is_literal(e) for e in node.elts)
    return False


def statement_tokens(code: str) -> list[str]:
    """The module as a list of canonical statements (see the module doc).

    :raises SyntaxError: ``code`` is not valid Python.
    """
    tree = ast.parse(code)
    canon = _Canon()
    out: list[str] = []
    classes = [n for n in tree.body if isinstance(n, ast.ClassDef)]
    funcs = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    rest = [n for n in tree.body if not isinstance(n, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))]
    for c in sorted(classes, key=lambda c: c.name != "Model"):
        canon.klass(c, out)
    order = {"get_inputs": 0, "get_init_inputs": 1}
    for f in sorted(funcs, key=lambda f: order.get(f.name, 2)):
        canon.function(f, out)
    tail: list[str] = []
    for s in rest:
        if isinstance(s, ast.Assign) and _is_literal(s.value):
            continue  # a size constant: its value is dropped anyway, its name is a placeholder
        if isinstance(s, ast.Assign) and any(isinstance(t, ast.Name) and t.id in _VARIANT_NAMES for t in s.targets):
            continue  # the CPU backend's sizes: the same task at other values
        canon.stmt(s, tail)
    out.extend(sorted(tail))
    return out
