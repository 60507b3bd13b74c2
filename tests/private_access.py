"""Find where toolrelay reaches into a dependency's private parts (`_name`).

A static walk (AST) of one module, used by tests/test_no_private_imports.py.
"Dependency" is every module that is not toolrelay's own, the standard library
included (asyncio's `Task._fut_waiter` is as private as httpcore's pool). What
it reports, each with the line:

1. Imports naming a private component: `import a._b`, `from a._b import c`,
   `from a import _c`, `importlib.import_module("a._b")`, `__import__("a._b")`.
   Relative imports are toolrelay's own; `__future__` and `__dunder__` names
   are public.
2. `x._name` (read, write or delete) where `x` is
   - bound to a dependency: an imported module or object, a name annotated with
     an imported type (`request: Request`), assigned a call of one
     (`c = httpx.AsyncClient()`), caught as one (`except httpx.HTTPError as e`),
     or `self.attr` declared or assigned as one;
   - `self`/`cls` in a class derived from a dependency's class, when the class
     does not define `_name` itself (so it is the base's);
   - anything the walk cannot type, when toolrelay defines no `_name` anywhere
     (then it can only be someone else's), or `_name` is one of `KNOWN_PRIVATE`
     (private names of dependencies this tree has reached for).
3. `getattr`/`setattr`/`hasattr`/`delattr(x, "_name")`, `vars(x)["_name"]` and
   `x.__dict__["_name"]` on anything but `self`/`cls`: a string is how code
   reaches for an attribute it cannot name in its own types.
4. A class derived from a dependency's class that overrides one of the base's
   `_private` members (looked up on the imported base), or any method of a base
   that is run, not extended (`NOT_EXTENSIBLE`: uvicorn's `Server`, whose
   `startup` a subclass once overrode).

Public by documentation despite the underscore: enum's `_sunder_` names,
namedtuple's `_replace`, `_asdict`, `_fields`, `_make`, `_field_defaults`,
`os._exit` and `sys._getframe`.
"""

from __future__ import annotations

import ast
import importlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

PACKAGE: Final = "toolrelay"
_LOCAL: Final = "<module>"
"""The root of a `Ref` to a class the walked module defines itself."""

KNOWN_PRIVATE: Final = frozenset(
    {
        "_fut_waiter",  # asyncio.Task
        "_json",  # starlette.requests.Request's body cache
        "_transport_for_url",  # httpx.AsyncClient
        "_transport",  # httpx.AsyncClient, anyio/asyncio streams
        "_pool",  # httpx's transport
        "_network_backend",  # httpcore's pool
        "_is_stream_consumed",  # httpx.Response
        "_httpcore_stream",  # httpx's response stream
        "_receive_buffer",  # h11.Connection
        "_receive_buffer_closed",  # h11.Connection
        "_bytes_in_chunk",  # h11's ChunkedReader
        "_bytes_to_discard",  # h11's ChunkedReader
        "_reading_trailer",  # h11's ChunkedReader
        "_h11_state",  # httpcore's HTTP/1.1 connection
        "_network_stream",  # httpcore's HTTP/1.1 connection
        "_assign_requests_to_connections",  # httpcore's pool
    }
)

NOT_EXTENSIBLE: Final = ("uvicorn.Server",)
"""Classes of dependencies that are run through their public API, never subclassed to
change what they do: overriding any of their methods is reported."""

PUBLIC_UNDERSCORED: Final = frozenset(
    {"_replace", "_asdict", "_fields", "_make", "_field_defaults"}
)
"""namedtuple's documented API."""

DOCUMENTED: Final = frozenset({"os._exit", "sys._getframe"})

_REFLECTION: Final = frozenset({"getattr", "setattr", "hasattr", "delattr"})
_TYPING_ROOTS: Final = frozenset({"typing", "typing_extensions", "collections", "builtins"})
"""Annotations from these say nothing about whose object a value is (`Any`, `Iterable[…]`)."""


def is_private(name: str) -> bool:
    """`_x` and `__x`; not `__dunder__`, not enum's `_sunder_`, not `_` alone."""
    if not name.startswith("_") or name == "_":
        return False
    if name.startswith("__") and name.endswith("__"):
        return False
    sunder = len(name) > 2 and name.endswith("_") and not name.startswith("__")
    return not sunder and name not in PUBLIC_UNDERSCORED


def _own_module(dotted: str) -> bool:
    return dotted.split(".")[0] in (PACKAGE, "__future__")


@dataclass(frozen=True, slots=True)
class Finding:
    path: str
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.message}"


@dataclass(frozen=True, slots=True)
class Ref:
    """What a name or expression is known to be: `name` is its dotted origin
    (`httpx.AsyncClient`); `instance` when it is an object of that type, not the
    module or class itself."""

    name: str
    instance: bool = False

    @property
    def own(self) -> bool:
        return self.name.split(".")[0] in (PACKAGE, _LOCAL)

    def attribute(self, attr: str) -> Ref | None:
        """A module's or class's attribute is that module's; an instance's attribute
        holds whatever was put there (the app's `state.services` is ours)."""
        return None if self.instance else Ref(f"{self.name}.{attr}")


@dataclass(slots=True)
class _Class:
    name: str
    dep_bases: list[Ref]
    own_bases: bool
    defined: set[str] = field(default_factory=set)
    attrs: dict[str, Ref | None] = field(default_factory=dict)


def own_private_names(sources: Iterable[str]) -> frozenset[str]:
    """Every private name toolrelay itself defines as an attribute: module-level and
    class-level names, methods, `self._x`/`cls._x` assignments, `__slots__` entries."""
    names: set[str] = set()
    for source in sources:
        tree = ast.parse(source)
        names.update(_module_names(tree.body))
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                names.update(_module_names(node.body))
                names.update(_slots(node))
            elif (
                isinstance(node, ast.Attribute)
                and not isinstance(node.ctx, ast.Load)
                and _is_self(node.value)
            ):
                names.add(node.attr)
    return frozenset(name for name in names if is_private(name))


def _module_names(body: list[ast.stmt]) -> Iterator[str]:
    """Names a module or class body binds (defs, classes, assignments, annotations)."""
    for stmt in body:
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            yield stmt.name
        elif isinstance(stmt, ast.Assign):
            for target in stmt.targets:
                yield from (n.id for n in ast.walk(target) if isinstance(n, ast.Name))
        elif isinstance(stmt, ast.AnnAssign | ast.AugAssign) and isinstance(stmt.target, ast.Name):
            yield stmt.target.id


def _slots(node: ast.ClassDef) -> Iterator[str]:
    for stmt in node.body:
        if isinstance(stmt, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__slots__" for t in stmt.targets
        ):
            for const in ast.walk(stmt.value):
                if isinstance(const, ast.Constant) and isinstance(const.value, str):
                    yield const.value


def load(dotted: str) -> Any:
    """The object a dotted name names, imported; None when it cannot be found."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for part in parts[cut:]:
                obj = getattr(obj, part)
        except AttributeError:
            return None
        return obj
    return None


def _is_class(dotted: str) -> bool:
    """Whether a dependency's name is a class (so calling it makes one of its objects):
    imported and looked at, else by the naming convention."""
    if dotted.split(".")[0] in _TYPING_ROOTS:
        return False
    found = load(dotted)
    if found is None:
        return dotted.rsplit(".", 1)[-1][:1].isupper()
    return isinstance(found, type)


def check_source(
    source: str, path: str = "<string>", own_private: frozenset[str] | None = None
) -> list[Finding]:
    """The private accesses in one module's source (module doc). `own_private`: the private
    names toolrelay defines (`own_private_names`); by default, this source's own."""
    tree = ast.parse(source)
    if own_private is None:
        own_private = own_private_names([source])
    walker = _Walker(path, own_private)
    walker.run(tree)
    return sorted(walker.found, key=lambda f: (f.line, f.message))


def check_tree(root: Path, base: Path) -> list[Finding]:
    """Every module under `root`, paths named relative to `base`."""
    files = sorted(root.rglob("*.py"))
    sources = {path: path.read_text(encoding="utf-8") for path in files}
    own = own_private_names(sources.values())
    found: list[Finding] = []
    for path, source in sources.items():
        found.extend(check_source(source, str(path.relative_to(base)), own))
    return found


class _Walker(ast.NodeVisitor):
    """One module's walk, with the bindings it can see (module doc)."""

    def __init__(self, path: str, own_private: frozenset[str]) -> None:
        self.path = path
        self.own_private = own_private
        self.found: list[Finding] = []
        self.scopes: list[dict[str, Ref | None]] = [{}]
        self.classes: list[_Class] = []

    def run(self, tree: ast.Module) -> None:
        self._prebind(tree.body)
        self.visit(tree)

    def report(self, node: ast.AST, message: str) -> None:
        self.found.append(Finding(self.path, getattr(node, "lineno", 0), message))

    # -- bindings --------------------------------------------------------------------------

    def _prebind(self, body: list[ast.stmt]) -> None:
        """Module-level imports and classes, so a function sees names bound below it."""
        for stmt in body:
            if isinstance(stmt, ast.Import | ast.ImportFrom):
                self._bind_import(stmt)
            elif isinstance(stmt, ast.ClassDef):
                self.scopes[0][stmt.name] = Ref(f"{_LOCAL}.{stmt.name}")
            elif isinstance(stmt, ast.If | ast.Try):
                self._prebind([*stmt.body, *getattr(stmt, "orelse", [])])

    def _bind_import(self, node: ast.Import | ast.ImportFrom) -> None:
        scope = self.scopes[-1]
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    scope[alias.asname] = Ref(alias.name)
                else:
                    root = alias.name.split(".")[0]
                    scope[root] = Ref(root)
            return
        module = node.module or ""
        origin = f"{PACKAGE}.{module}" if node.level else module
        for alias in node.names:
            scope[alias.asname or alias.name] = Ref(f"{origin}.{alias.name}")

    def lookup(self, name: str) -> Ref | None:
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        return None

    def resolve(self, node: ast.expr) -> Ref | None:
        """What an expression is known to be, or None."""
        if isinstance(node, ast.Name):
            return self.lookup(node.id)
        if isinstance(node, ast.Attribute):
            if isinstance(node.value, ast.Name) and node.value.id == "self" and self.classes:
                return self.classes[-1].attrs.get(node.attr)
            base = self.resolve(node.value)
            return base.attribute(node.attr) if base is not None else None
        if isinstance(node, ast.Call):
            made = self.resolve(node.func)
            if made is not None and not made.instance and not made.own and _is_class(made.name):
                return Ref(made.name, instance=True)  # what a function returns is not known
        return None

    def typed(self, annotation: ast.expr | None) -> Ref | None:
        """The dependency type an annotation names (`Request`, `X | None`, `Optional[X]`,
        `Annotated[X, …]`, `"X"`); None for toolrelay's types and typing's generic ones."""
        if annotation is None:
            return None
        if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
            try:
                return self.typed(ast.parse(annotation.value, mode="eval").body)
            except SyntaxError:
                return None
        if isinstance(annotation, ast.BinOp) and isinstance(annotation.op, ast.BitOr):
            return self.typed(annotation.left) or self.typed(annotation.right)
        if isinstance(annotation, ast.Subscript):
            outer = self.resolve(annotation.value)
            if outer is not None and outer.name.rsplit(".", 1)[-1] in (
                "Optional",
                "Union",
                "Annotated",
            ):
                inner = annotation.slice
                options = inner.elts if isinstance(inner, ast.Tuple) else [inner]
                if outer.name.endswith("Annotated"):
                    options = options[:1]
                return next((t for t in map(self.typed, options) if t is not None), None)
            return self.typed(annotation.value)
        ref = self.resolve(annotation)
        if ref is None or ref.own or ref.instance or ref.name.split(".")[0] in _TYPING_ROOTS:
            return None
        return Ref(ref.name, instance=True)

    def bind(self, target: ast.expr, ref: Ref | None) -> None:
        if isinstance(target, ast.Name):
            self.scopes[-1][target.id] = ref
        elif isinstance(target, ast.Tuple | ast.List | ast.Starred):
            for name in ast.walk(target):
                if isinstance(name, ast.Name):
                    self.scopes[-1][name.id] = None
        elif (
            isinstance(target, ast.Attribute)
            and isinstance(target.value, ast.Name)
            and target.value.id == "self"
            and self.classes
        ):
            attrs = self.classes[-1].attrs
            if ref is not None or target.attr not in attrs:
                attrs[target.attr] = ref

    # -- statements that bind --------------------------------------------------------------

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._check_module(node, alias.name)
        self._bind_import(node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level == 0 and node.module and not _own_module(node.module):
            self._check_module(node, node.module)
            for alias in node.names:
                if is_private(alias.name):
                    self.report(node, f"imports {alias.name} from {node.module}: private")
        self._bind_import(node)

    def _check_module(self, node: ast.AST, dotted: str) -> None:
        if not _own_module(dotted) and any(is_private(part) for part in dotted.split(".")):
            self.report(node, f"imports {dotted}: a private module")

    def visit_Assign(self, node: ast.Assign) -> None:
        self.visit(node.value)
        ref = self.resolve(node.value)
        for target in node.targets:
            self._visit_target(target)
            self.bind(target, ref)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self.visit(node.value)
        self._visit_target(node.target)
        ref = self.typed(node.annotation)
        if ref is None and node.value is not None:
            ref = self.resolve(node.value)
        self.bind(node.target, ref)

    def _visit_target(self, target: ast.expr) -> None:
        if not isinstance(target, ast.Name):
            self.visit(target)

    def visit_For(self, node: ast.For | ast.AsyncFor) -> None:
        self.visit(node.iter)
        self.bind(node.target, None)
        self._visit_target(node.target)
        for stmt in [*node.body, *node.orelse]:
            self.visit(stmt)

    visit_AsyncFor = visit_For

    def visit_With(self, node: ast.With | ast.AsyncWith) -> None:
        for item in node.items:
            self.visit(item.context_expr)
            if item.optional_vars is not None:
                self.bind(item.optional_vars, self.resolve(item.context_expr))
        for stmt in node.body:
            self.visit(stmt)

    visit_AsyncWith = visit_With

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        if node.name:
            caught = (
                self.typed(node.type) if isinstance(node.type, ast.Name | ast.Attribute) else None
            )
            self.scopes[-1][node.name] = caught
        self.generic_visit(node)

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        for decorator in node.decorator_list:
            self.visit(decorator)
        self.scopes[-1][node.name] = None
        scope: dict[str, Ref | None] = {}
        args = node.args
        for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]:
            if arg is not None:
                scope[arg.arg] = self.typed(arg.annotation)
        self.scopes.append(scope)
        for stmt in node.body:
            self.visit(stmt)
        self.scopes.pop()

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        for expr in [*node.bases, *node.decorator_list]:
            self.visit(expr)
        bases = [self.resolve(base) for base in node.bases]
        dep_bases = [b for b in bases if b is not None and not b.own]
        info = _Class(node.name, dep_bases, any(b is None or b.own for b in bases))
        info.defined.update(name for name in own_private_names([ast.unparse(node)]))
        for stmt in node.body:
            if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                info.attrs[stmt.target.id] = self.typed(stmt.annotation)
        self._check_overrides(node, info)
        self.classes.append(info)
        self.scopes.append({})
        for stmt in node.body:
            self.visit(stmt)
        self.scopes.pop()
        self.classes.pop()
        self.scopes[-1][node.name] = Ref(f"{_LOCAL}.{node.name}")

    def _check_overrides(self, node: ast.ClassDef, info: _Class) -> None:
        """Members of the class that override a dependency base's private member, or any
        method of a class that is not to be extended (module doc, 4)."""
        loaded = [(ref.name, load(ref.name)) for ref in info.dep_bases]
        closed = [load(name) for name in NOT_EXTENSIBLE]
        for name in _module_names(node.body):
            for base_name, base in loaded:
                if not isinstance(base, type):
                    continue
                if is_private(name) and hasattr(base, name):
                    self.report(node, f"{node.name}.{name} overrides {base_name}.{name}: private")
                elif any(isinstance(c, type) and issubclass(base, c) for c in closed) and not (
                    name.startswith("__") and name.endswith("__")
                ):
                    self.report(
                        node,
                        f"{node.name}.{name} overrides {base_name}.{name}: "
                        f"{base_name} is run through its public API, not subclassed",
                    )

    # -- accesses ----------------------------------------------------------------------------

    def visit_Attribute(self, node: ast.Attribute) -> None:
        self.visit(node.value)
        if is_private(node.attr):
            self._check_access(node, node.value, node.attr, by_name=False)

    def visit_Call(self, node: ast.Call) -> None:
        self.generic_visit(node)
        func = node.func
        first = node.args[0] if node.args else None
        literal = first.value if isinstance(first, ast.Constant) else None
        if isinstance(func, ast.Name) and func.id in _REFLECTION and len(node.args) >= 2:
            name = node.args[1]
            literal_name = name.value if isinstance(name, ast.Constant) else None
            if isinstance(literal_name, str) and is_private(literal_name) and first is not None:
                self._check_access(node, first, literal_name, by_name=True)
            return
        importer = self.resolve(func)
        dynamic = (isinstance(func, ast.Name) and func.id == "__import__") or (
            importer is not None and importer.name == "importlib.import_module"
        )
        if dynamic and isinstance(literal, str):
            self._check_module(node, literal)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        self.generic_visit(node)
        key = node.slice
        if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
            return
        if not is_private(key.value):
            return
        value = node.value
        if isinstance(value, ast.Attribute) and value.attr == "__dict__":
            self._check_access(node, value.value, key.value, by_name=True)
        elif (
            isinstance(value, ast.Call)
            and isinstance(value.func, ast.Name)
            and value.func.id == "vars"
            and value.args
        ):
            self._check_access(node, value.args[0], key.value, by_name=True)

    def _check_access(self, node: ast.AST, obj: ast.expr, attr: str, *, by_name: bool) -> None:
        shown = f"{ast.unparse(obj)}.{attr}"
        if self.classes and (_is_self(obj) or _is_super(obj)):
            info = self.classes[-1]
            ours = attr in info.defined or (info.own_bases and attr in self.own_private)
            if info.dep_bases and (_is_super(obj) or not ours):
                bases = ", ".join(b.name for b in info.dep_bases)
                self.report(node, f"`{shown}`: private attribute of the base class {bases}")
            return
        ref = self.resolve(obj)
        if ref is not None and ref.own:
            return
        if ref is not None:
            if f"{ref.name}.{attr}" not in DOCUMENTED:
                self.report(node, f"`{shown}`: private attribute of {ref.name}")
        elif by_name:
            self.report(node, f"`{shown}` reached by name: another object's private attribute")
        elif attr in KNOWN_PRIVATE:
            self.report(node, f"`{shown}`: a dependency's private attribute")
        elif attr not in self.own_private:
            self.report(node, f"`{shown}`: toolrelay defines no {attr}, so it is a dependency's")


def _is_self(node: ast.expr) -> bool:
    return isinstance(node, ast.Name) and node.id in ("self", "cls")


def _is_super(node: ast.expr) -> bool:
    return (
        isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "super"
    )
