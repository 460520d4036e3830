"""mqstore.cli.plain_table draws the CLI's tables on a plain console without rich: its output must
be rich's, byte for byte, and it must hand everything else back to rich."""

from __future__ import annotations

import fcntl
import io
import os
import pty
import string
import struct
import subprocess
import sys
import termios

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rich.console import Console
from rich.table import Table

from mqstore.cli import plain_table

REBUILD = ["segment", "batches", "valid bytes", "offset entries", "time entries", "aborted txns", "next offset"]


def rich_text(title: str | None, headers: list[str], rows: list[list[str]], width: int) -> str:
    buf = io.StringIO()
    Console(file=buf, width=width, force_terminal=False, color_system=None).print(_table(title, headers, rows))
    return buf.getvalue()


def _table(title: str | None, headers: list[str], rows: list[list[str]]) -> Table:
    table = Table(title=title, show_lines=False)
    for h in headers:
        table.add_column(h)
    for r in rows:
        table.add_row(*r)
    return table


# printable ASCII without "[" and ":" (what the plain renderer takes), more spaces than usual
PLAIN = string.digits + string.ascii_letters + "!\"#$%&'()*+,-./;<=>?@\\]^_`{|}~" + "    "
words = st.text(alphabet=PLAIN, max_size=40)


@st.composite
def tables(draw: st.DrawFn) -> tuple[str | None, list[str], list[list[str]], int]:
    n = draw(st.integers(1, 9))
    headers = draw(st.lists(words, min_size=n, max_size=n))
    rows = draw(st.lists(st.lists(words, min_size=n, max_size=n), max_size=5))
    title = draw(st.one_of(st.none(), st.just(""), words, st.text(alphabet=PLAIN, max_size=200)))
    return title, headers, rows, draw(st.integers(1, 240))


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tables())
def test_same_bytes_as_rich(case: tuple[str | None, list[str], list[list[str]], int]) -> None:
    title, headers, rows, width = case
    text = plain_table.render(title, headers, rows, width)
    if text is not None:
        assert text == rich_text(title, headers, rows, width)


@pytest.mark.parametrize("width", [40, 60, 79, 80, 81, 100, 120, 160, 200])
@pytest.mark.parametrize("nrows", [0, 1, 3, 40])
def test_the_rebuild_table(width: int, nrows: int) -> None:
    """The table `kafka rebuild-index` prints: drawn by the plain renderer (not handed to rich) at
    every usual width, and identical to rich's (wrapped headers, `…` in narrow columns)."""
    rows = [[f"orders-{i % 7}/{i * 1000:020d}.log", str(25165 + i), str(1073741824 - i), str(262143 * i), "262143",
             str(i % 3), str(1030272 * (i + 1))] for i in range(nrows)]
    text = plain_table.render("rebuilt indexes", REBUILD, rows, width)
    assert text is not None
    assert text == rich_text("rebuilt indexes", REBUILD, rows, width)


@pytest.mark.parametrize(("cell", "why"), [("a[b]c", "markup"), ("x :smile: y", "emoji code"), ("é", "non-ASCII"),
                                           ("a\tb", "tab"), ("a\nb", "newline")])
def test_hands_back_what_rich_would_interpret(cell: str, why: str) -> None:
    assert plain_table.render("t", ["h"], [[cell]], 80) is None, why
    assert plain_table.render(cell, ["h"], [["x"]], 80) is None, why
    assert plain_table.render("t", [cell], [["x"]], 80) is None, why


def test_hands_back_what_does_not_fit() -> None:
    assert plain_table.render("t", ["h"] * 30, [["x"] * 30], 80) is None  # columns narrower than 3
    assert plain_table.render("t", [], [], 80) is None
    assert plain_table.render("t", ["a", "b"], [["only one"]], 80) is None


def test_console_width(monkeypatch: pytest.MonkeyPatch) -> None:
    """None where rich's Console would be a terminal; else COLUMNS (rich's width too) or FULL."""
    monkeypatch.setattr(sys, "stdout", io.StringIO())
    for env in [{}, {"COLUMNS": "123"}, {"COLUMNS": "abc"}, {"COLUMNS": "123", "LINES": "9"}, {"FORCE_COLOR": "1"},
                {"FORCE_COLOR": ""}, {"TTY_COMPATIBLE": "1"}, {"TTY_COMPATIBLE": "0", "COLUMNS": "90"},
                {"TTY_COMPATIBLE": "0", "FORCE_COLOR": "1"}, {"NO_COLOR": "1"}]:
        console = Console(_environ=env)
        got = plain_table.console_width(env)
        if console.is_terminal:
            assert got is None, env
        elif env.get("COLUMNS", "").isdigit():
            assert got == console.size.width == int(env["COLUMNS"]), env
        else:
            assert got == plain_table.FULL, env


def test_full_width_keeps_every_value() -> None:
    rows = [[f"orders-{i}/{i * 1000:020d}.log", str(25165 + i), str(1073741824 - i), "262143", "262143", "0",
             str(10**15 + i)] for i in range(3)]
    text = plain_table.render("rebuilt indexes", REBUILD, rows, plain_table.FULL)
    assert text is not None and "…" not in text
    assert text == rich_text("rebuilt indexes", REBUILD, rows, plain_table.FULL)
    for r in rows:
        assert all(f" {c} " in text for c in r)


CHILD = r"""
import os, sys
from mqstore.cli.common import print_table
rows = [[f"orders-{i}/{i * 1000:020d}.log", str(25165 + i), str(1073741824 - i), "262143", "262143", "0", str(i)]
        for i in range(int(sys.argv[2]))]
headers = ["segment", "batches", "valid bytes", "offset entries", "time entries", "aborted txns", "next offset"]
if sys.argv[1] == "rich":  # rich, with the one rule of print_table: a plain console without COLUMNS is unlimited
    from rich.console import Console
    from rich.table import Table
    t = Table(title="rebuilt indexes", show_lines=False)
    for h in headers:
        t.add_column(h)
    for r in rows:
        t.add_row(*r)
    console = Console()
    if not console.is_terminal and not os.environ.get("COLUMNS", "").isdigit():
        console = Console(width=1_000_000)
    console.print(t)
else:
    print_table("rebuilt indexes", headers, rows)
    print("rich imported" if "rich" in sys.modules else "rich not imported", file=sys.stderr)
"""


def _run(which: str, nrows: int, env: dict[str, str], stdin: int | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-c", CHILD, which, str(nrows)], env=env, stdin=stdin,
                          capture_output=True, check=True)


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("COLUMNS", "LINES", "FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "NO_COLOR")}
    return {**env, **extra}


@pytest.mark.parametrize("extra", [{}, {"COLUMNS": "132"}, {"COLUMNS": "50"}, {"COLUMNS": "0"}, {"COLUMNS": "x"},
                                   {"FORCE_COLOR": "1"}, {"FORCE_COLOR": ""}, {"TTY_COMPATIBLE": "1"},
                                   {"TTY_COMPATIBLE": "0"}, {"NO_COLOR": "1"}])
def test_print_table_in_a_process_matches_rich(extra: dict[str, str]) -> None:
    """The whole decision (terminal or not, COLUMNS, colour forced) gives what rich's Console
    prints in the same environment, and rich is not imported when the plain renderer draws."""
    env = _env(**extra)
    for nrows in (0, 3):
        ours, theirs = _run("ours", nrows, env, subprocess.DEVNULL), _run("rich", nrows, env, subprocess.DEVNULL)
        assert ours.stdout == theirs.stdout
    plain = not extra.get("FORCE_COLOR") and extra.get("TTY_COMPATIBLE") != "1" and extra.get("COLUMNS") != "0"
    assert ours.stderr.decode().strip() == ("rich not imported" if plain else "rich imported")


@pytest.mark.parametrize("columns", [60, 140])
def test_a_terminal_on_stdin_does_not_narrow_a_piped_table(columns: int) -> None:
    """rich would take its width from a terminal on stdin even with stdout redirected (and cut
    values): a piped table is as wide as its content whatever the terminal."""
    master, slave = pty.openpty()
    try:
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
        ours, theirs = _run("ours", 2, _env(), slave), _run("rich", 2, _env(), slave)
        wide = _run("ours", 2, _env(), subprocess.DEVNULL)
    finally:
        os.close(master)
        os.close(slave)
    assert ours.stdout == theirs.stdout == wide.stdout
    assert "…" not in ours.stdout.decode()
    assert ours.stderr.decode().strip() == "rich not imported"
