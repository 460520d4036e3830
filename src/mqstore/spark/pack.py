"""Pack mqstore and its dependencies into an archive for ``spark-submit --archives``.

Spark's documented way to give executors a Python environment is a packed virtual environment
shipped with ``--archives env.tar.gz#environment`` and ``spark.pyspark.python=./environment/bin/python``
(venv-pack).  venv-pack refuses editable installs and packs everything in the environment
(PySpark alone is ~500 MB, and the nodes' Spark brings its own); :func:`pack_environment` packs the
running virtual environment's interpreter and ``pyvenv.cfg`` with only the distributions
the executors need: mqstore (its package files, compiled-kernel caches included) and the closure
of its runtime requirements, plus pandas and pyarrow for PySpark's Arrow path.  Spark 4 refuses
to unpack a link that points outside the archive, so ``bin/python3.X`` is a copy of the base
interpreter's launcher (as ``python -m venv --copies`` makes); like venv-pack's archives it still
needs the base Python installation (``pyvenv.cfg``'s ``home``) at the same path on every node.
"""

from __future__ import annotations

import importlib.metadata as md
import os
import re
import sys
import tarfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from mqstore.errors import InvalidArgumentError

__all__ = ["PackResult", "pack_environment", "requirement_closure"]

#: provided by the Spark installation of every node (``$SPARK_HOME/python/lib``)
PROVIDED_BY_SPARK = frozenset({"pyspark", "py4j"})
#: needed by PySpark's Python workers for Arrow data, beyond mqstore's own requirements
WORKER_EXTRAS = ("pandas", "pyarrow")
#: Spark unpacks ``.tar.gz``/``.tgz`` with the system's tar (file modes kept); a plain ``.tar`` or a
#: ``.zip`` with Java code that drops the executable bits, so the interpreter could not run
SUFFIXES = {".tar.gz": "w:gz", ".tgz": "w:gz"}


@dataclass(slots=True)
class PackResult:
    out: str
    python: str  # the interpreter the links point to (must exist on every node)
    distributions: list[str]
    files: int
    bytes: int
    seconds: float

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _key(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_closure(roots: tuple[str, ...] = ("mqstore", *WORKER_EXTRAS)) -> list[str]:
    """The installed distributions ``roots`` need at run time (no extras), without the ones every
    node's Spark provides; sorted by normalised name."""
    seen: set[str] = set()
    todo = list(roots)
    while todo:
        name = todo.pop()
        key = _key(name)
        if key in seen or key in PROVIDED_BY_SPARK:
            continue
        try:
            dist = md.distribution(name)
        except md.PackageNotFoundError:
            if name in roots:
                raise InvalidArgumentError(f"{name} is not installed in {sys.prefix}") from None
            continue  # an optional requirement whose marker did not apply here
        seen.add(key)
        for req in dist.requires or []:
            if re.search(r"\bextra\s*==", req):
                continue
            m = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", req)
            if m:
                todo.append(m.group(1))
    return sorted(seen)


def _dist_files(name: str) -> list[tuple[Path, str]]:
    """``(source file, path inside site-packages)`` of an installed distribution."""
    dist = md.distribution(name)
    out = []
    for f in dist.files or []:
        rel = str(f)
        if rel.startswith("..") or os.path.isabs(rel):  # scripts in bin/, data outside site-packages
            continue
        src = Path(str(dist.locate_file(f)))
        if src.is_file():
            out.append((src, rel))
    return out


def _package_files(package_dir: Path) -> list[tuple[Path, str]]:
    """mqstore's own package tree (an editable install lists only a pointer in its RECORD)."""
    out = []
    for src in sorted(package_dir.rglob("*")):
        if src.is_file() and not src.name.endswith(".tmp"):
            out.append((src, str(src.relative_to(package_dir.parent))))
    return out


def pack_environment(out: str | os.PathLike[str], *, overwrite: bool = False) -> PackResult:
    """Write the archive ``out`` (``.tar.gz`` or ``.tgz``) of the running virtual
    environment's interpreter and mqstore with its run-time dependencies (see the module doc)."""
    import mqstore

    t0 = time.perf_counter()
    target = Path(out)
    mode = next((m for s, m in SUFFIXES.items() if target.name.endswith(s)), None)
    if mode is None:
        raise InvalidArgumentError(f"the archive name must end with {' or '.join(SUFFIXES)} (Spark unpacks other "
                                   "archives without file modes: the interpreter could not run)", path=str(target))
    if target.exists() and not overwrite:
        raise InvalidArgumentError("the archive exists (use --overwrite)", path=str(target))
    prefix = Path(sys.prefix)
    if sys.prefix == sys.base_prefix or not (prefix / "pyvenv.cfg").is_file():
        raise InvalidArgumentError(f"{sys.executable} does not run in a virtual environment: create one "
                                   "(python -m venv), install mqstore in it and run pack-env with its python")
    site = f"lib/python{sys.version_info[0]}.{sys.version_info[1]}/site-packages"
    names = requirement_closure()
    package_dir = Path(mqstore.__file__).resolve().parent
    files: list[tuple[Path, str]] = []
    for name in names:
        files += _package_files(package_dir) if _key(name) == "mqstore" else _dist_files(name)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".tmp")
    size = 0
    kwargs: dict[str, Any] = {"compresslevel": 1} if mode == "w:gz" else {}
    with tarfile.open(tmp, mode, **kwargs) as tar:  # type: ignore[call-overload]
        tar.add(prefix / "pyvenv.cfg", "pyvenv.cfg")
        tar.add(prefix / "bin", "bin", recursive=False)  # Hadoop's untar makes no parent directory for links
        for link in sorted((prefix / "bin").glob("python*")):
            if link.is_symlink() and "/" not in os.readlink(link):
                tar.add(link, f"bin/{link.name}", recursive=False)  # python -> python3.11: kept as a link
            elif link.is_file():
                # Spark unpacks no link that leaves the archive: the base interpreter's small launcher
                # is copied (as `venv --copies` does); it finds its libraries and the standard library
                # at the base installation's path, which must exist on every node
                tar.add(os.path.realpath(link), f"bin/{link.name}", recursive=False)
        seen: set[str] = set()
        for src, rel in files:
            arc = f"{site}/{rel}"
            if arc in seen:
                continue
            seen.add(arc)
            tar.add(src, arc, recursive=False)
            size += src.stat().st_size
    os.replace(tmp, target)
    return PackResult(str(target), str(Path(sys.executable).resolve()), names, len(seen), size,
                      round(time.perf_counter() - t0, 2))
