"""The import rules of ``src/mqstore`` (docs/architecture.md), checked over the source with ``ast``.

* Layers import only downward: formats -> kernels -> storage -> api -> spark -> cli.  ``errors``
  is importable by all; ``mqstore/__init__.py`` and ``mqstore/kafka.py`` (the public package
  faces) sit in the api layer.
* No import cycle between modules (counting every import, also those inside functions and under
  ``TYPE_CHECKING``: a cycle hidden in a function is still a cycle).
* ``mmap``/``fcntl`` only in ``storage/``; ``numba`` only in ``kernels/``.
* No import of a private (``_name``) module or name across packages (a package is a directory).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
ROOT = SRC / "mqstore"

#: the layer of each top-level part of the package (higher may import lower, never the reverse)
LAYERS = {
    "errors": 0,
    "formats": 1,
    "kernels": 2,
    "storage": 3,
    "api": 4,
    "__init__": 4,  # ``import mqstore``: the public face of the api layer
    "kafka": 4,  # ``mqstore.kafka``: re-exports mqstore.api.kafka
    "spark": 5,
    "cli": 6,
}

#: modules outside kernels/ allowed to import numba: none (spark/_kafka_kernels.py, the one
#: exception, moved into kernels/ with the kernels split of issue 13).
NUMBA_OUTSIDE_KERNELS_ALLOWED: tuple[str, ...] = ()

#: (importing module, imported module, private name) allowed across packages: none (api used the
#: scan kernels' private decoder until the kernels split of issue 13 gave it a public one).
PRIVATE_IMPORTS_ALLOWED: tuple[tuple[str, str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class Import:
    source: str  # importing module
    target: str  # imported mqstore module (or a top-level external module name)
    names: tuple[str, ...]  # names taken by ``from target import ...``
    line: int


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


def _package_of(module: str, path: Path) -> str:
    return module if path.name == "__init__.py" else module.rsplit(".", 1)[0]


def _imports(modules: dict[str, Path]) -> list[Import]:
    out: list[Import] = []
    for mod, path in modules.items():
        pkg = _package_of(mod, path)
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    out.append(Import(mod, alias.name, (), node.lineno))
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = pkg.split(".")
                    base = base[: len(base) - (node.level - 1)]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                names = tuple(a.name for a in node.names)
                # ``from pkg import module`` imports that module
                subs = [n for n in names if f"{target}.{n}" in modules]
                for n in subs:
                    out.append(Import(mod, f"{target}.{n}", (), node.lineno))
                rest = tuple(n for n in names if n not in subs)
                if rest or not subs:
                    out.append(Import(mod, target, rest, node.lineno))
    return out


MODULES = _modules()
IMPORTS = _imports(MODULES)


def _internal(imp: Import) -> bool:
    return imp.target == "mqstore" or imp.target.startswith("mqstore.")


def _layer(module: str) -> int:
    parts = module.split(".")
    return LAYERS["__init__"] if len(parts) == 1 else LAYERS[parts[1]]


def _where(imp: Import) -> str:
    return f"{MODULES[imp.source].relative_to(SRC)}:{imp.line} imports {imp.target}" + (
        f" ({', '.join(imp.names)})" if imp.names else "")


def test_every_part_has_a_layer() -> None:
    assert {m.split(".")[1] if "." in m else "__init__" for m in MODULES} <= set(LAYERS)


def upward_imports() -> list[str]:
    return [_where(i) for i in IMPORTS if _internal(i) and _layer(i.target) > _layer(i.source)]


def test_no_upward_import() -> None:
    assert upward_imports() == []


def import_cycles() -> list[list[str]]:
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for i in IMPORTS:
        if _internal(i) and i.target in MODULES and i.target != i.source:
            graph[i.source].add(i.target)
    # Tarjan's strongly connected components
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycle() -> None:
    assert import_cycles() == []


def system_imports_outside_their_layer() -> list[str]:
    bad = []
    for i in IMPORTS:
        top = i.target.split(".")[0]
        part = i.source.split(".")[1] if "." in i.source else ""
        if top in ("mmap", "fcntl") and part != "storage":
            bad.append(_where(i))
        if top == "numba" and part != "kernels" and i.source not in NUMBA_OUTSIDE_KERNELS_ALLOWED:
            bad.append(_where(i))
    return bad


def test_mmap_fcntl_only_in_storage_numba_only_in_kernels() -> None:
    assert system_imports_outside_their_layer() == []


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def private_imports_across_packages() -> list[str]:
    bad = []
    for i in IMPORTS:
        if not _internal(i):
            continue
        src_pkg = _package_of(i.source, MODULES[i.source])
        target_path = MODULES.get(i.target)
        tgt_pkg = _package_of(i.target, target_path) if target_path is not None else i.target.rsplit(".", 1)[0]
        if src_pkg == tgt_pkg:
            continue
        private_module = any(_private(p) for p in i.target.split("."))
        private_names = [n for n in i.names if _private(n) and (i.source, i.target, n) not in PRIVATE_IMPORTS_ALLOWED]
        if private_module or private_names:
            bad.append(_where(i))
    return bad


def test_no_private_import_across_packages() -> None:
    assert private_imports_across_packages() == []


# ----------------------------------------------------------------------------- the checker itself
@pytest.mark.parametrize(("source", "target", "upward"), [
    ("mqstore.formats.kafka.batch", "mqstore.kernels.kafka", True),
    ("mqstore.storage.rocketmq.index", "mqstore.kernels.rocketmq.chain_walk", False),
    ("mqstore.storage.rocketmq.index", "mqstore.api.rocketmq", True),
    ("mqstore.spark.query", "mqstore.cli.main", True),
    ("mqstore.cli.main", "mqstore.spark.session", False),
    ("mqstore.kafka", "mqstore.api.rocketmq", False),
    ("mqstore.errors", "mqstore.formats.rocketmq.record", True),
    ("mqstore.formats.rocketmq.record", "mqstore.errors", False),
])
def test_layer_order(source: str, target: str, upward: bool) -> None:
    assert (_layer(target) > _layer(source)) is upward


def test_the_checker_sees_imports_in_functions_and_relative_imports() -> None:
    found = {(i.source, i.target) for i in IMPORTS}
    # a function-local import (the CLI imports its commands' modules lazily)
    assert ("mqstore.cli.rocketmq", "mqstore.storage.rocketmq.layout") in found
    # ``from mqstore.storage.rocketmq import layout`` style imports resolve to the module
    assert all(i.target in MODULES or not _internal(i) or i.target == "mqstore" for i in IMPORTS), \
        [i for i in IMPORTS if _internal(i) and i.target not in MODULES]
