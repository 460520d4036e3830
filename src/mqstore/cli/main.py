"""Entry point of the ``mqstore`` command.

Kept free of heavy imports: ``mqstore --version`` answers without importing click (the group is in
:mod:`mqstore.cli.app`, imported by :func:`main` for every other command and by ``cli`` here).
"""

from __future__ import annotations

import atexit
import gc
import os
import sys
import threading
from typing import Any

from mqstore import __version__


def __getattr__(name: str) -> Any:
    """``from mqstore.cli.main import cli`` (tests, tools): the click group, imported on first use."""
    if name == "cli":
        from mqstore.cli.app import cli

        return cli
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


#: set by :func:`main`: this process runs one command from the shell and ends with it (a command
#: may then tune the interpreter for a short life; in-process callers such as tests never set it)
one_shot = False


def main() -> None:
    """The ``mqstore`` command: runs :func:`cli`, then ends the process (see :func:`_end_process`)."""
    global one_shot
    one_shot = True
    if sys.argv[1:] == ["--version"]:  # what click's version option prints, without importing click
        sys.stdout.write(f"mqstore, version {__version__}\n")
        _end_process(0)
        return
    # numpy's bundled OpenBLAS starts one thread per CPU when numpy is imported (~50 ms of a
    # one-shot command on this project's 2-core machine); mqstore does no linear algebra, so a
    # command runs it single-threaded unless the user set the variable.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    # the imports make ~100k long-lived objects and no garbage: no cyclic collection over them
    # (~20 collections, ~20 ms of start-up)
    gc_on = gc.isenabled()
    gc.disable()
    from mqstore.cli.app import cli

    if gc_on:
        gc.enable()

    try:
        cli(prog_name="mqstore")
    except SystemExit as exc:
        _end_process(exc.code)
        raise
    _end_process(0)


def _end_process(code: Any) -> None:
    """End the process now with exit status ``code``, skipping the interpreter's teardown.

    Once numba has loaded and run compiled code, Python's finalization (module clean-up, the last
    garbage collections over numba's object graph, LLVM objects) takes 0.3–0.4 s on this project's
    machine: a fifth of a one-shot ``rebuild-index`` of 1 GiB.  The command's work is done by
    then: every store it opened is closed (files flushed as their commands promise), so only the
    standard streams are flushed and the ``atexit`` handlers run before ``os._exit``.  The normal
    exit is kept (this returns) when another non-daemon thread is still alive, when PySpark is
    loaded (its JVM is stopped by its own exit handling), when ``code`` is a message rather than a
    status, when a stream cannot be flushed (a closed pipe: Python reports it as usual), or when
    ``MQSTORE_NORMAL_EXIT`` is set in the environment."""
    if os.environ.get("MQSTORE_NORMAL_EXIT") or "pyspark" in sys.modules:
        return
    if code is None:
        status = 0
    elif isinstance(code, int) and not isinstance(code, bool):
        status = code
    else:
        return
    threads = sys.modules.get("mqstore.kernels.threads")
    if threads is not None:
        threads.shutdown_pool()
    main_thread = threading.main_thread()
    if any(t is not main_thread and not t.daemon and t.is_alive() for t in threading.enumerate()):
        return
    try:
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
    except (OSError, ValueError):
        return
    atexit._run_exitfuncs()
    try:
        for stream in (sys.stdout, sys.stderr):  # whatever an exit handler printed
            if stream is not None:
                stream.flush()
    except (OSError, ValueError):
        pass
    os._exit(status & 0xFF)


if __name__ == "__main__":
    main()
