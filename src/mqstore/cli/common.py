"""Shared helpers of the CLI: error handling, JSON output, tables."""

from __future__ import annotations

import base64
import functools
import json
import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import click

from mqstore.errors import MqStoreError

F = TypeVar("F", bound=Callable[..., Any])

json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON (one object per line) for scripts.")


def handle_errors(func: F) -> F:
    """Turn mqstore errors and OS errors into one error line and exit code 2 (never a traceback)."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except MqStoreError as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(2)
        except (FileNotFoundError, FileExistsError, PermissionError, IsADirectoryError, NotADirectoryError) as exc:
            click.echo(f"error: {exc.strerror or exc}: {exc.filename}", err=True)
            sys.exit(2)
        except BrokenPipeError:  # `mqstore ... | head`
            sys.stderr.close()
            sys.exit(0)

    return wrapper  # type: ignore[return-value]


def _default(obj: Any) -> Any:
    if isinstance(obj, bytes | bytearray | memoryview):
        return base64.b64encode(bytes(obj)).decode("ascii")
    if hasattr(obj, "_asdict"):
        return obj._asdict()
    if hasattr(obj, "__dataclass_fields__"):
        import dataclasses

        return dataclasses.asdict(obj)
    if hasattr(obj, "tolist"):
        return obj.tolist()
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def to_json(obj: Any) -> str:
    return json.dumps(obj, default=_default, ensure_ascii=False, separators=(",", ":"))


def echo_json_lines(objs: Iterable[Any]) -> int:
    n = 0
    for obj in objs:
        click.echo(to_json(obj))
        n += 1
    return n


class LazyGroup(click.Group):
    """A click group whose subcommands named in ``lazy`` (name → (module, attribute)) are imported
    when first used: a one-shot command pays only for the imports of its own module."""

    def __init__(self, *args: Any, lazy: dict[str, tuple[str, str]] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy = dict(lazy or {})

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(super().list_commands(ctx)) | set(self.lazy))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        cmd = super().get_command(ctx, cmd_name)
        if cmd is None and cmd_name in self.lazy:
            import importlib

            module, attr = self.lazy[cmd_name]
            cmd = getattr(importlib.import_module(module), attr)
            self.add_command(cmd, cmd_name)
        return cmd


def preload_tables() -> None:
    """Import rich's table printing in a daemon thread, for a command that will print a table after
    a long native call: the call releases the GIL, so the import (~50 ms) overlaps it rather than
    following it.  :func:`print_table` then finds the modules loaded (or waits for them)."""
    import threading

    from mqstore.cli import plain_table

    if plain_table.console_width() is not None:
        return  # (print_table draws a plain table itself; it imports rich only for what it cannot draw)

    def load() -> None:
        try:
            import rich.console
            import rich.table  # noqa: F401
        except Exception:  # (print_table imports them again and reports any error)
            pass

    threading.Thread(target=load, name="mqstore-preload", daemon=True).start()


def print_table(title: str | None, columns: list[str], rows: Iterable[Iterable[Any]]) -> None:
    """Print a table the way rich prints it (rich's default box).  On a terminal it fits the
    terminal's width; on a plain console (a file or a pipe) it is as wide as its content, so no
    value is cut, or ``COLUMNS`` wide when that is set.  A plain console's table of plain text is
    drawn by :mod:`mqstore.cli.plain_table` without importing rich (~85 ms of CPU), with the
    bytes rich would print."""
    from mqstore.cli import plain_table

    cells = [["" if v is None else str(v) for v in row] for row in rows]
    width = plain_table.console_width()
    text = None if width is None else plain_table.render(title, columns, cells, width)
    if text is not None:
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title, show_lines=False)
    for col in columns:
        table.add_column(col)
    for row in cells:
        table.add_row(*row)
    (Console() if width is None else Console(width=width)).print(table)


ProgressFn = Callable[[int, int], None]


@contextmanager
def progress(label: str, *, unit: str = "bytes", enabled: bool = True) -> Iterator[ProgressFn | None]:
    """The one progress display of every long command: a rich bar on **stderr** when stderr is a
    terminal (and ``enabled``), else nothing (``None``: scripts and pipes see no progress output).

    Yields ``update(done, total)`` (``total`` may change between calls; ``unit`` ``"bytes"`` shows
    sizes and a transfer rate, anything else plain counts).  rich is imported only when a bar is
    shown."""
    if not enabled or not sys.stderr.isatty():
        yield None
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        MofNCompleteColumn,
        Progress,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )

    cols: list[Any] = ["[progress.description]{task.description}", BarColumn()]
    cols += [DownloadColumn(), TransferSpeedColumn()] if unit == "bytes" else [MofNCompleteColumn()]
    cols.append(TimeRemainingColumn())
    with Progress(*cols, console=Console(stderr=True), transient=True) as prog:
        task = prog.add_task(label, total=None)

        def update(done: int, total: int) -> None:
            prog.update(task, completed=done, total=total)

        yield update
