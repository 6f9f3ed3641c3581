"""Issue 42: the package's modules use each other through public names only. A leading-underscore name is private
to its module; another module that needs it gets a public name (with a docstring) in the home module instead."""
import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "gemmlab"
SUBPACKAGES = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()}  # runtime, measure, chapters
MODULES = {p.stem for p in PACKAGE.rglob("*.py") if p.stem != "__init__"} | SUBPACKAGES


def is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _root(node: ast.AST) -> str | None:
    """The name an attribute chain starts from (gemmlab in gemmlab.runtime.kernel)."""
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def private_uses(source: str, module: str) -> list[str]:
    """'line: what' for each private name of another gemmlab module that `source` (gemmlab/<module>.py) imports
    (from .kernel import _to) or reads as an attribute (kernel._to, gemmlab.kernel._to, an alias's ._to)."""
    tree = ast.parse(source)
    aliases = {"gemmlab": None}  # a name bound to gemmlab (None) or to one of its modules (its name)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            parts = (node.module or "").split(".")
            if node.level == 0 and parts[0] != "gemmlab":
                continue
            # None: the package or a subpackage (from . import kernel, from ..measure import bench)
            home = parts[-1] if node.module and parts[-1] not in SUBPACKAGES | {"gemmlab"} else None
            for a in node.names:
                if home is None and a.name in MODULES:  # from . import kernel [as _kernel]
                    aliases[a.asname or a.name] = a.name
                elif is_private(a.name) and home != module:
                    found.append(f"{node.lineno}: from {'.' * node.level}{node.module or ''} import {a.name}")
        elif isinstance(node, ast.Import):
            for a in node.names:
                parts = a.name.split(".")
                if parts[0] == "gemmlab" and a.asname:  # import gemmlab.runtime.kernel as k
                    aliases[a.asname] = parts[-1] if parts[-1] not in SUBPACKAGES | {"gemmlab"} else None
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Attribute) and is_private(node.attr)):
            continue
        value = node.value
        if isinstance(value, ast.Name) and aliases.get(value.id, "") not in ("", None):
            home = aliases[value.id]  # kernel._to
        elif isinstance(value, ast.Attribute) and value.attr in MODULES and _root(value) in aliases \
                and aliases[_root(value)] is None:
            home = value.attr  # gemmlab.kernel._to, gemmlab.runtime.kernel._to
        elif isinstance(value, ast.Name) and value.id in aliases and aliases[value.id] is None:
            home = "__init__"  # gemmlab._something
        else:
            continue
        if home != module:
            found.append(f"{node.lineno}: {ast.unparse(node)}")
    return found


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_module_uses_another_modules_private_names(path):
    uses = private_uses(path.read_text(), path.stem)
    assert not uses, f"{path.relative_to(PACKAGE.parent)} uses private names of other modules (give them public names): {uses}"


@pytest.mark.parametrize("source, found", [
    ("from .kernel import _to", ["1: from .kernel import _to"]),
    ("from gemmlab.measure.bench import _time as t", ["1: from gemmlab.measure.bench import _time"]),
    ("from . import kernel as _kernel\nx = _kernel._module", ["2: _kernel._module"]),
    ("import gemmlab\nx = gemmlab.layouts._mma_mnk('m16n8k8')", ["2: gemmlab.layouts._mma_mnk"]),
    ("import gemmlab.measure.bench as b\nb._time(f, 3, 1)", ["2: b._time"]),
    ("from ..runtime import kernel\nkernel._to(x)", ["2: kernel._to"]),
    ("import gemmlab\nx = gemmlab.runtime.kernel._to", ["2: gemmlab.runtime.kernel._to"]),
    ("from . import kernel\nkernel.__name__, kernel.to_array", []),  # dunder and public names are fine
    ("from .fusion import _inputs\nself._x = 1", []),  # a module's own private names (checked as fusion.py)
    ("import numpy as np\nnp._NoValue", []),  # other packages are not this test's business
])
def test_the_check_finds_each_kind_of_use(source, found):
    assert private_uses(source, "fusion") == found


# --- Issue 54: layers that import downward only ---------------------------------------------------------------------
# runtime (steps, sources, compilation, backends, hardware facts) <- measure (verify, benchmark, records, profiles)
# <- the package's public API (gemmlab/__init__.py: gemmlab.step, gemmlab.verify, gemmlab.bench, ..., what a reader
# types; it imports the runtime and measure only, and reaches a chapter module by name on first use, never by an
# import statement) <- chapters (one module per chapter, and what they share) <- the command line (__main__).
LAYERS = {"errors": 0, "runtime": 0, "measure": 1, "__init__": 2, "chapters": 3, "__main__": 4}
MAX_LOCAL_IMPORTS = 10  # function-local imports left in the package, each of an optional or heavy dependency
OPTIONAL = {"cupy", "cupyx", "cupy_backends", "torch", "pygments", "nvidia",  # absent without a GPU / optional
            "fcntl", "resource"}  # POSIX only


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer(module: str) -> int:
    parts = module.split(".")
    if len(parts) == 1:
        return LAYERS["__init__"]
    return LAYERS[parts[1]]


MODULE_NAMES = {module_name(p) for p in PACKAGE.rglob("*.py")}


def own_imports(source: str, module: str, is_package: bool = False) -> list[tuple[int, str, bool]]:
    """(line, imported gemmlab module, inside a function) for each import of the package's own modules in `source`,
    the source of `module` (a dotted name; `is_package`: it is an __init__.py)."""
    tree = ast.parse(source)
    in_function = set()
    for f in ast.walk(tree):
        if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            in_function.update(id(n) for n in ast.walk(f) if n is not f)
    here = module.split(".") if is_package else module.split(".")[:-1]
    out = []
    for node in ast.walk(tree):
        targets = []
        if isinstance(node, ast.ImportFrom):
            base = ".".join(here[:len(here) - node.level + 1] + ([node.module] if node.module else [])) if node.level \
                else node.module
            for a in node.names:
                targets.append(f"{base}.{a.name}" if f"{base}.{a.name}" in MODULE_NAMES else base)
        elif isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        for t in targets:
            if t and t.split(".")[0] == "gemmlab":
                out.append((node.lineno, t, id(node) in in_function))
    return out


def import_graph() -> dict[str, set[str]]:
    graph = {}
    for path in PACKAGE.rglob("*.py"):
        name = module_name(path)
        graph[name] = {t for _, t, _ in own_imports(path.read_text(), name, path.name == "__init__.py")
                       if t in MODULE_NAMES and t != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan): each holds at least one cycle."""
    index, low, stack, on, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_package_imports_downward_only():
    """runtime <- measure <- gemmlab's API <- chapters <- __main__: no module imports one of a layer above its own,
    at the top or inside a function."""
    upward = []
    for path in sorted(PACKAGE.rglob("*.py")):
        name = module_name(path)
        for line, target, _ in own_imports(path.read_text(), name, path.name == "__init__.py"):
            if target in MODULE_NAMES and layer(target) > layer(name):
                upward.append(f"{path.relative_to(PACKAGE.parent)}:{line} imports {target}")
    assert not upward, "imports that go up a layer (move the code to the layer it belongs to):\n" + "\n".join(upward)


def test_the_package_has_no_import_cycle():
    found = cycles(import_graph())
    assert not found, f"modules that import each other, directly or through others: {found}"


def test_local_imports_are_few_and_of_optional_dependencies_only():
    """A function-local import hides a cycle or delays a cost: none of the package's own modules is imported inside a
    function, and at most MAX_LOCAL_IMPORTS imports of anything are, each of an optional dependency and saying so in a
    comment. (CuPy, PyTorch and the NVIDIA wheels are asked for through runtime/optional.py, the one door.)"""
    own, local = [], []
    for path in sorted(PACKAGE.rglob("*.py")):
        name, source = module_name(path), path.read_text()
        lines = source.splitlines()
        own += [f"{path.relative_to(PACKAGE.parent)}:{line} {t}"
                for line, t, inside in own_imports(source, name, path.name == "__init__.py") if inside]
        for f in ast.walk(ast.parse(source)):
            if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for n in ast.walk(f):
                    if isinstance(n, ast.Import):
                        local += [(path, n.lineno, a.name.split(".")[0], lines[n.lineno - 1]) for a in n.names]
                    elif isinstance(n, ast.ImportFrom) and not n.level:
                        local.append((path, n.lineno, (n.module or "").split(".")[0], lines[n.lineno - 1]))
    assert not own, f"function-local imports of the package's own modules (import them at the top): {own}"
    where = {(p, line): (m, text) for p, line, m, text in local}
    other = sorted(f"{p.relative_to(PACKAGE.parent)}:{line} {m}" for (p, line), (m, _) in where.items() if m not in OPTIONAL)
    assert not other, f"function-local imports of a module that is neither optional nor heavy: {other}"
    silent = sorted(f"{p.relative_to(PACKAGE.parent)}:{line}" for (p, line), (_, text) in where.items() if "#" not in text)
    assert not silent, f"local imports that do not say why they are local (a comment on the line): {silent}"
    assert len(where) <= MAX_LOCAL_IMPORTS, sorted(f"{p.relative_to(PACKAGE.parent)}:{line}" for p, line in where)


@pytest.mark.parametrize("graph, found", [
    ({"a": {"b"}, "b": {"a"}}, [["a", "b"]]),
    ({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}, [["a", "b", "c"]]),
    ({"a": {"b"}, "b": set()}, []),
])
def test_the_cycle_finder_finds_cycles(graph, found):
    assert cycles(graph) == found


def test_the_import_reader_resolves_relative_and_absolute_imports():
    source = ("from . import kernel\nfrom ..measure import bench\nimport gemmlab\nfrom gemmlab.chapters.glue import glue\n"
              "def f():\n    from .registry import lookup\n")
    assert own_imports(source, "gemmlab.runtime.gpu") == [
        (1, "gemmlab.runtime.kernel", False), (2, "gemmlab.measure.bench", False), (3, "gemmlab", False),
        (4, "gemmlab.chapters.glue", False), (6, "gemmlab.runtime.registry", True)]
