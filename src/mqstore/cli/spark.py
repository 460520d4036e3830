"""`mqstore spark ...` commands: thin wrappers over the jobs in :mod:`mqstore.spark`.

Every command takes ``--master`` (default ``local[*]``; ``--master ""`` keeps what ``spark-submit``
set) and repeatable ``--conf key=value``.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click

from mqstore.spark.session import DEFAULT_MASTER

F = TypeVar("F", bound=Callable[..., Any])


def spark_options(func: F) -> F:
    """Add ``--master`` and ``--conf`` to a command."""
    func = click.option("--conf", "conf", multiple=True, metavar="KEY=VALUE",
                        help="Spark configuration (repeatable).")(func)
    func = click.option("--master", default=DEFAULT_MASTER, show_default=True,
                        help="Spark master URL; empty keeps the one spark-submit set.")(func)
    return func


def open_session(master: str, conf: tuple[str, ...], app_name: str) -> Any:
    """Parse ``--conf`` and start (or join) the SparkSession for a command."""
    from mqstore.spark.session import get_session, parse_conf

    return get_session(master or None, parse_conf(list(conf)), app_name=app_name)


def handle_spark_errors(func: F) -> F:
    """Report errors raised inside Spark (analysis, Python workers, streaming) as one line, exit 2."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except Exception as exc:
            try:
                from pyspark.errors import PySparkException
            except ImportError:  # pragma: no cover - pyspark missing
                raise exc from None
            if not isinstance(exc, PySparkException) and type(exc).__module__.split(".")[0] != "py4j":
                raise
            click.echo(f"error: {first_error_line(str(exc))}", err=True)
            sys.exit(2)

    return wrapper  # type: ignore[return-value]


def first_error_line(message: str) -> str:
    """The most useful line of a Spark error: the mqstore error raised in a worker if there is one."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    for line in reversed(lines):
        if line.startswith("mqstore.errors.") or ("Error: " in line and "mqstore" in line):
            return line
    for line in lines:
        if "Error" in line or "error" in line:
            return line
    return lines[0] if lines else message


@click.group(name="spark")
def group() -> None:
    """Spark jobs over both layouts (rebuild indexes, streaming dispatch, query keys, export)."""
