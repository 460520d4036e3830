"""Running mqstore's Spark jobs beyond local mode: paths, the executor preflight, the worker
Python, and Spark's errors in one line.

* :func:`absolute_path` is the one rule for path options: every path a job or a data source
  hands to executors is made absolute on the driver (executors resolve a relative path in their
  own work directory).  URLs (``s3://...``, ``file://...``) are left as they are.
* :func:`preflight` runs one cheap Spark job (a few tiny tasks, spread over the executors) that
  checks every executor host sees the paths the driver sees, and raises
  :class:`~mqstore.errors.PathNotVisibleError` naming the path and the host.  In local mode
  (``local``/``local[N]``: the executors are the driver) it does nothing.
* :func:`worker_python` decides which interpreter the executors run, :func:`configure_workers`
  applies it (and mqstore's source directory on the executors' ``PYTHONPATH``) to a session.
* :func:`explain_spark_error` turns a Py4J / PySpark error into its cause: the Python exception
  raised in the task (type and message), or the missing worker Python.
"""

from __future__ import annotations

import dataclasses
import os
import re
import socket
import sys
import sysconfig
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mqstore.errors import ClusterError, PathNotVisibleError, WorkerPythonError
from mqstore.storage.fileio import is_url  # (the one URL rule: scheme://, file:// included)

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

__all__ = [
    "absolute_path",
    "absolute_paths",
    "check_visible",
    "configure_workers",
    "executors_are_driver",
    "explain_spark_error",
    "is_loopback_master",
    "is_url",
    "preflight",
    "shipped_archives",
    "source_dir",
    "with_absolute_paths",
    "worker_python",
]

DOCS = "docs/spark.md, Running on a cluster"


# ------------------------------------------------------------------------------------ paths
def absolute_path(path: str | os.PathLike[str]) -> str:
    """``path`` made absolute against the driver's working directory (``~`` expanded, symlinks
    kept: another node may resolve them differently); URLs unchanged."""
    text = os.fspath(path)
    if not text or is_url(text):
        return text
    return os.path.abspath(os.path.expanduser(text))


def absolute_paths(paths: Iterable[str | os.PathLike[str] | None]) -> tuple[Any, ...]:
    """:func:`absolute_path` of each (``None`` kept; a comma list of directories, as the
    ``commitLogPath`` option takes, made absolute item by item)."""
    from mqstore.storage.rocketmq.config import MULTI_PATH_SPLITTER, split_paths

    out: list[Any] = []
    for p in paths:
        if p is None or is_url(p):
            out.append(p)
        else:
            out.append(MULTI_PATH_SPLITTER.join(absolute_path(q) for q in split_paths(os.fspath(p))))
    return tuple(out)


def with_absolute_paths(opts: Any) -> Any:
    """Parsed data source options (``paths``, ``commit_log_paths``) with every path absolute:
    the one call both sources make before planning."""
    changes = {name: absolute_paths(getattr(opts, name)) for name in ("paths", "commit_log_paths")
               if getattr(opts, name, None)}
    return dataclasses.replace(opts, **changes) if changes else opts


# ------------------------------------------------------------------------------------ masters
def executors_are_driver(master: str | None) -> bool:
    """Local mode (``local``, ``local[N]``, ``local[N,F]``): executors run in the driver's JVM,
    on its host and in its working directory, so the preflight has nothing to check."""
    m = (master or "").strip()
    return m == "local" or m.startswith("local[")


def is_loopback_master(master: str | None) -> bool:
    """A master whose workers run on this machine: local mode, ``local-cluster[...]``, or a
    standalone master on 127.0.0.1/localhost (the workers can run this very interpreter)."""
    m = (master or "").strip()
    if executors_are_driver(m) or m.startswith("local-cluster["):
        return True
    if m.startswith("spark://"):
        hosts = [h.rsplit(":", 1)[0] for h in m[len("spark://"):].split(",")]
        return bool(hosts) and all(h in ("127.0.0.1", "localhost", "[::1]", "::1") for h in hosts)
    return False


# ------------------------------------------------------------------------------------ worker python
def source_dir() -> str | None:
    """The directory holding the ``mqstore`` package when it is not installed in a
    site-packages directory (a source checkout or an editable install), else ``None``."""
    parent = str(Path(__file__).resolve().parents[2])
    installed = {str(Path(p).resolve()) for p in (sysconfig.get_paths().get("purelib"),
                                                  sysconfig.get_paths().get("platlib")) if p}
    return None if parent in installed else parent


def worker_python(master: str | None, configured: str | None = None) -> str:
    """The interpreter Spark's Python workers must run for ``master``: ``configured``
    (``spark.pyspark.python``), else ``PYSPARK_PYTHON``, else this interpreter when the workers
    run on this machine; on a remote cluster with neither set, a :class:`WorkerPythonError`."""
    for value in (configured, os.environ.get("PYSPARK_PYTHON")):
        if value and value.strip():
            return value.strip()
    if is_loopback_master(master):
        return sys.executable
    raise WorkerPythonError(
        f"master {master!r}: say which Python the executors run: set spark.pyspark.python (or PYSPARK_PYTHON) "
        "to an interpreter every worker node has with mqstore installed, e.g. ./environment/bin/python with "
        f"--archives mqstore-env.tar.gz#environment (`mqstore spark pack-env`; {DOCS})")


def configure_workers(spark: SparkSession) -> str | None:
    """Make ``spark``'s Python workers run :func:`worker_python` (PySpark itself only reads
    ``PYSPARK_PYTHON``, not ``spark.pyspark.python`` from the builder or SparkConf) with mqstore's
    source directory on their ``PYTHONPATH`` when mqstore is not installed (and no environment
    is shipped with ``--archives``); returns the python."""
    try:
        sc = spark.sparkContext
    except Exception:  # a Spark Connect session: the server's configuration decides
        return None
    conf = sc.getConf()
    python = worker_python(sc.master, conf.get("spark.pyspark.python", None))
    if "/" in python and not os.path.isabs(python) and not os.path.exists(python):
        # Spark plans Python data sources in a worker on the driver, started with this same
        # interpreter path, relative to the driver's working directory
        raise WorkerPythonError(
            f"the worker Python {python} does not exist in the driver's working directory {os.getcwd()}: Spark "
            "also runs it on the driver to plan the rocketmq and kafka-log sources; unpack the shipped "
            f"environment there too (mkdir -p environment && tar -xzf mqstore-env.tar.gz -C environment; {DOCS})")
    sc.pythonExec = python  # used by every Python function created from now on (data sources too)
    os.environ["PYSPARK_PYTHON"] = python
    src = source_dir()
    if src is not None and not shipped_archives(conf):  # a shipped environment brings its own mqstore
        current = [p for p in str(sc.environment.get("PYTHONPATH", "")).split(os.pathsep) if p]
        if src not in current:
            sc.environment["PYTHONPATH"] = os.pathsep.join([*current, src])
    return python


def shipped_archives(conf: Any) -> bool:
    """Whether the session ships archives to the executors (``--archives``: a packed environment)."""
    return any(str(conf.get(key, "") or "").strip() for key in ("spark.archives", "spark.yarn.dist.archives"))


# ------------------------------------------------------------------------------------ preflight
def check_visible(path: str, what: str, kind: str = "exists") -> None:
    """Raise :class:`PathNotVisibleError` when ``path`` is missing here (run on an executor).

    ``kind``: ``exists``, ``dir``, or ``writable`` (a directory this process may write in)."""
    if not path or is_url(path):
        return
    problem = None
    if not os.path.exists(path):
        problem = "does not exist"
    elif kind in ("dir", "writable") and not os.path.isdir(path):
        problem = "is not a directory"
    elif kind == "writable" and not os.access(path, os.W_OK | os.X_OK):
        problem = "is not writable"
    if problem:
        raise PathNotVisibleError(
            f"the {what} {path} {problem} on executor host {socket.gethostname()} (the driver sees it): "
            f"put it on a filesystem every node mounts at the same path ({DOCS})")


def _nearest_existing(path: str) -> str:
    p = Path(path)
    while not p.exists() and p.parent != p:
        p = p.parent
    return str(p)


def _probe(items: list[tuple[str, str, str]]) -> tuple[str, str | None]:
    try:
        for path, what, kind in items:
            check_visible(path, what, kind)
    except PathNotVisibleError as exc:
        return socket.gethostname(), str(exc)
    return socket.gethostname(), None


def preflight(spark: SparkSession, read: Mapping[str, Iterable[str | os.PathLike[str]]] | None = None,
              write: Mapping[str, Iterable[str | os.PathLike[str]]] | None = None) -> int:
    """Check that every executor sees what the driver sees: ``read`` maps a description
    (``"store"``) to paths that must exist, ``write`` to output/checkpoint paths whose directory
    (or nearest existing parent) must exist and be writable.  One small Spark job, a couple of
    tasks per executor core; returns the number of tasks run (0 in local mode or with URLs only).
    Raises :class:`PathNotVisibleError` (one line: path and executor host), or
    :class:`WorkerPythonError` / :class:`ClusterError` when the tasks cannot run at all."""
    sc = spark.sparkContext
    if executors_are_driver(sc.master):
        return 0
    items: list[tuple[str, str, str]] = []
    for what, paths in (read or {}).items():
        for p in paths:
            text = os.fspath(p)
            if text and not is_url(text) and os.path.exists(text):
                items.append((absolute_path(text), what, "dir" if os.path.isdir(text) else "exists"))
    for what, paths in (write or {}).items():
        for p in paths:
            text = os.fspath(p)
            if text and not is_url(text):
                items.append((_nearest_existing(absolute_path(text)), what, "writable"))
    if not items:
        return 0
    n = 2 * max(2, sc.defaultParallelism, _executor_count(sc))
    try:
        results = sc.parallelize(range(n), n).mapPartitions(lambda _: [_probe(items)]).collect()
    except Exception as exc:  # the tasks could not run: say why in one line
        raise error_from_spark(exc) from None
    for _host, problem in results:
        if problem:
            raise PathNotVisibleError(problem)
    return n


def _executor_count(sc: Any) -> int:
    try:
        return int(sc._jsc.sc().getExecutorMemoryStatus().size()) - 1  # the driver is listed too
    except Exception:  # pragma: no cover - a JVM without the call
        return 0


# ------------------------------------------------------------------------------------ errors
_CANNOT_RUN = re.compile(r'Cannot run program "([^"]+)"(?:[^:\n]*)?(?::\s*([^\n]*))?')
_TRACEBACK = "Traceback (most recent call last):"
_JAVA_EXC = re.compile(r"(?:^|[:\s])((?:[a-z]\w*\.)+([A-Z][\w$]*(?:Exception|Error))):\s*(.+)")
_EXC_LINE = re.compile(r"^([A-Za-z_][\w]*(?:\.[A-Za-z_]\w*)*)(?::\s?(.*))?$")


def explain_spark_error(message: str) -> str:
    """The cause of a Spark error in one line: the Python exception raised in a task (``Type:
    message``, from the last traceback in the text), the worker Python that cannot be started,
    or else the most telling line of the text."""
    m = _CANNOT_RUN.search(message)
    if m and ("python" in m.group(1).lower() or "python" in message[m.end():m.end() + 200].lower()):
        cause = (m.group(2) or "").strip().rstrip(".")
        return (f"the executors cannot run the worker Python {m.group(1)}" + (f" ({cause})" if cause else "")
                + ": set spark.pyspark.python / PYSPARK_PYTHON to an interpreter every worker node has, "
                f"or ship one with --archives ({DOCS})")
    exc = last_python_exception(message)
    if exc is not None:
        return exc
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    for line in reversed(lines):
        if line.startswith("mqstore.errors.") or ("Error: " in line and "mqstore" in line):
            return line
    java = [m for m in map(_JAVA_EXC.search, lines) if m]
    caused = [m for m, line in zip(map(_JAVA_EXC.search, lines), lines, strict=True) if m and "Caused by:" in line]
    if caused or java:  # the root cause (the last "Caused by:"), else the first exception
        m = (caused or java)[-1 if caused else 0]
        return f"{m.group(2)}: {m.group(3).strip()}"
    for line in lines:
        if ("Error" in line or "error" in line) and not line.startswith("An error occurred while calling"):
            return line
    return lines[0] if lines else message


def last_python_exception(message: str) -> str | None:
    """``Type: message`` of the exception that ends the last Python traceback in ``message``
    (``mqstore.errors.`` and ``builtins.`` prefixes dropped), or ``None``."""
    at = message.rfind(_TRACEBACK)
    if at < 0:
        return None
    for line in message[at + len(_TRACEBACK):].splitlines():
        if not line.strip() or line[:1].isspace():
            continue  # the "  File ..., line N" frames and their source lines
        m = _EXC_LINE.match(line.strip())
        if m is None:
            return None
        name = m.group(1)
        for prefix in ("mqstore.errors.", "builtins."):
            if name.startswith(prefix):
                name = name[len(prefix):]
        return f"{name}: {m.group(2)}" if m.group(2) else name
    return None


def error_from_spark(exc: BaseException) -> ClusterError:
    """A typed error for a Spark job that failed before mqstore's code ran (the preflight)."""
    text = explain_spark_error(str(exc))
    if text.startswith("the executors cannot run the worker Python"):
        return WorkerPythonError(text)
    if text.startswith("PathNotVisibleError: "):
        return PathNotVisibleError(text[len("PathNotVisibleError: "):])
    if text.startswith("ModuleNotFoundError: No module named"):
        return WorkerPythonError(f"the executors' Python cannot import what mqstore needs ({text}): install "
                                 f"mqstore there, or ship it with --archives / --py-files ({DOCS})")
    return ClusterError(f"a Spark job failed on the executors: {text}")
