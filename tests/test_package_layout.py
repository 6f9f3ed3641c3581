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
