"""Entry point of the ``mqstore`` command."""

from __future__ import annotations

import atexit
import importlib
import os
import sys
import threading
from typing import Any

import click

from mqstore import __version__

# Command groups are imported when first used: a one-shot command (say ``mqstore rocketmq
# rebuild-index``) must not pay for the imports of the others (Spark, Kafka, the demo).
_LAZY_COMMANDS: dict[str, tuple[str, str]] = {
    "rocketmq": ("mqstore.cli.rocketmq", "group"),
    "kafka": ("mqstore.cli.kafka", "group"),
    "spark": ("mqstore.cli.spark", "group"),
    "demo": ("mqstore.cli.demo", "demo"),
    "warm-up": ("mqstore.cli.warmup", "warm_up"),
}


class _LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(super().list_commands(ctx)) | set(_LAZY_COMMANDS))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        cmd = super().get_command(ctx, cmd_name)
        if cmd is None and cmd_name in _LAZY_COMMANDS:
            module, attr = _LAZY_COMMANDS[cmd_name]
            cmd = getattr(importlib.import_module(module), attr)
            self.add_command(cmd, cmd_name)
        return cmd


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="mqstore")
def cli() -> None:
    """mqstore: RocketMQ- and Kafka-compatible message-log storage, offline tools and Spark jobs."""


def main() -> None:
    """The ``mqstore`` command: runs :func:`cli`, then ends the process (see :func:`_end_process`)."""
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
