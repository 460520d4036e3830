"""The tables of the CLI when stdout is not a terminal, drawn without importing rich.

:func:`mqstore.cli.common.print_table` prints its tables with rich, whose import costs a one-shot
command ~85 ms of CPU (``kafka rebuild-index`` walks a 1 GiB log in ~0.3 s).  When rich would
print without colours (stdout is a file or a pipe), a table of plain ASCII text is a pure layout
problem, and this module solves it the way rich 13-15 does, character for character:

* columns are measured (longest word and longest cell, each with one space of padding on both
  sides) and, when the table is wider than the console, the widest wrappable columns are narrowed
  first, then every column evenly;
* cells are word-wrapped, a word longer than its column ends in ``…``, header cells sit at the
  bottom of their row, the title is centred over the table;
* the box is rich's default heavy-headed one.

Its one departure from a bare ``rich.console.Console()``, on both paths: on a plain console without
``COLUMNS`` a table is as wide as its content (:data:`FULL`), where rich would fit it in 80
columns (or in the width of a terminal on stdin) and cut values with ``…``.  A table written to a
file or a pipe keeps every digit; ``COLUMNS=N`` fits it in ``N`` columns.

:func:`render` returns ``None`` for anything outside that domain (a character rich would
interpret as markup or emoji, or would measure as other than one cell; a column narrower than
three cells; a table wider than the console), and the caller then hands the table to rich.  The
tests compare both over random tables and widths.
"""

from __future__ import annotations

import builtins
import itertools
import os
import re
import sys
from collections.abc import Sequence

# printable ASCII without "[" (markup) and ":" (emoji codes): rich prints such text unchanged
_PLAIN = re.compile(r"[ -9;-Z\\-~]*")
_WORD = re.compile(r"\s*\S+\s*")
_TRAILING_SPACE = re.compile(r"\s+$")

# rich's HEAVY_HEAD box
_TOP = ("┏", "━", "┳", "┓")
_HEAD_ROW = ("┃", "┃", "┃")
_HEAD_RULE = ("┡", "━", "╇", "┩")
_ROW = ("│", "│", "│")
_BOTTOM = ("└", "─", "┴", "┘")
_PAD = 1  # one space each side of every cell
_MIN_COLUMN = 3  # below this rich's edge cases (zero-width renders) are not reproduced


FULL = 1_000_000  # the width of a plain console without COLUMNS: wider than any table


def console_width(environ: os._Environ[str] | dict[str, str] | None = None) -> int | None:
    """The width of a table on ``sys.stdout``: ``COLUMNS`` when set, else :data:`FULL`; or ``None``
    when rich's ``Console()`` would treat stdout as a terminal (colours, styles, the terminal's
    width) or as anything else this module does not reproduce."""
    env = os.environ if environ is None else environ
    if sys.platform == "win32" or hasattr(builtins, "get_ipython"):
        return None
    tty_compatible = env.get("TTY_COMPATIBLE", "")
    if tty_compatible == "1":
        return None
    if tty_compatible != "0":
        force = env.get("FORCE_COLOR")
        if force:
            return None
        if force is None:
            isatty = getattr(sys.stdout, "isatty", None)
            try:
                if isatty is not None and isatty():
                    return None
            except ValueError:
                pass
    encoding = (getattr(sys.stdout, "encoding", "utf-8") or "utf-8").lower()
    if not encoding.startswith("utf"):
        return None
    columns = env.get("COLUMNS")
    return int(columns) if columns is not None and columns.isdigit() else FULL


def _measure(text: str, width: int) -> tuple[int, int]:
    """(minimum, maximum) width of one padded cell in a column of ``width``."""
    if width < 1:
        return 0, 0
    inner = width - 2 * _PAD
    if inner < 1:
        lo, hi = width, width
    else:
        hi = len(text)
        words = text.split()
        lo = max(map(len, words)) if words else hi
        lo, hi = min(lo, inner), min(hi, inner)
        if hi < 1:
            lo, hi = 0, 0
        lo, hi = lo + 2 * _PAD, hi + 2 * _PAD
    lo, hi = min(lo, width), min(hi, width)
    return (0, 0) if hi < 1 else (lo, hi)


def _measure_column(cells: Sequence[str], width: int) -> tuple[int, int]:
    if width < 1:
        return 0, 0
    ranges = [_measure(c, width) for c in cells]
    return min(max(r[0] for r in ranges), width), min(max(r[1] for r in ranges), width)


def _reduce(total: int, ratios: list[int], maximums: list[int], values: list[int]) -> list[int]:
    """Take ``total`` off ``values`` in proportion to ``ratios``, at most ``maximums`` each."""
    ratios = [r if m else 0 for r, m in zip(ratios, maximums, strict=True)]
    left_ratio = sum(ratios)
    if not left_ratio:
        return values[:]
    out = []
    for ratio, most, value in zip(ratios, maximums, values, strict=True):
        if ratio and left_ratio > 0:
            take = min(most, round(ratio * total / left_ratio))
            out.append(value - take)
            total -= take
            left_ratio -= ratio
        else:
            out.append(value)
    return out


def _collapse(widths: list[int], limit: int) -> list[int]:
    """Narrow the widest columns (all wrappable) until the table fits ``limit`` or they are even."""
    excess = sum(widths) - limit
    while sum(widths) and excess > 0:
        widest = max(widths)
        second = max((w for w in widths if w != widest), default=0)
        step = widest - second
        if not step:
            break
        widths = _reduce(excess, [1 if w == widest else 0 for w in widths], [min(excess, step)] * len(widths), widths)
        excess = sum(widths) - limit
    return widths


def _column_widths(columns: list[list[str]], avail: int) -> list[int]:
    widths = [_measure_column(c, avail)[1] or 1 for c in columns]
    if sum(widths) > avail:
        widths = _collapse(widths, avail)
        if sum(widths) > avail:
            widths = _reduce(sum(widths) - avail, [1] * len(widths), widths, widths)
        widths = [_measure_column(c, w)[1] for c, w in zip(columns, widths, strict=True)]
    return widths


def _lines(text: str, width: int, fold: bool) -> list[str]:
    """``text`` word-wrapped in ``width``: a word too long for any line gets a line of its own,
    folded across lines when ``fold`` (the title), else whole (cells: the caller ends it in ``…``).
    Trailing spaces past the width are dropped."""
    cuts = [0]
    used = 0
    for m in _WORD.finditer(text):
        start, word = m.start(), m.group(0)
        length = len(word.rstrip())
        if width - used >= length:
            used += len(word)
        elif length > width and fold:
            pieces = [word[i:i + width] for i in range(0, len(word), width)]
            for piece in pieces[:-1]:
                if start:
                    cuts.append(start)
                start += len(piece)
            if start:
                cuts.append(start)
            used = len(pieces[-1])
        elif length > width or (used and start):
            if start:
                cuts.append(start)
            used = len(word)
    cuts.append(len(text))
    out = []
    for a, b in itertools.pairwise(cuts):
        line = text[a:b]
        if len(line) > width and (m := _TRAILING_SPACE.search(line)) is not None:
            line = line[: len(line) - min(len(m.group(0)), len(line) - width)]
        out.append(line)
    return out


def _cell_lines(text: str, width: int) -> list[str]:
    """The lines of one cell's text in ``width`` characters (left-justified, ``…`` overflow)."""
    return [(line if len(line) <= width else line[: width - 1] + "…").ljust(width) for line in _lines(text, width, False)]


def _title_lines(title: str, width: int) -> list[str]:
    """The title wrapped (long words folded) and centred in ``width``."""
    out = []
    for line in _lines(title, width, True):
        line = line.rstrip()[:width]
        out.append((" " * ((width - len(line)) // 2) + line).ljust(width))
    return out


def render(title: str | None, headers: Sequence[str], rows: Sequence[Sequence[str]], width: int) -> str | None:
    """The text rich prints for this table on a plain console ``width`` wide, or ``None`` when the
    table is outside what this module reproduces."""
    n = len(headers)
    if n == 0 or any(len(r) != n for r in rows):
        return None
    texts = [title or "", *headers, *(c for r in rows for c in r)]
    if not all(_PLAIN.fullmatch(t) for t in texts):
        return None
    extra = n + 1  # the edges and the dividers
    columns = [[h, *(r[i] for r in rows)] for i, h in enumerate(headers)]
    widths = _column_widths(columns, max(0, width - extra))
    total = sum(widths) + extra
    if min(widths) < _MIN_COLUMN or total > width:
        return None
    out: list[str] = []
    if title:
        out += _title_lines(title, total)

    def rule(parts: tuple[str, str, str, str]) -> str:
        left, line, cross, right = parts
        return left + cross.join(line * w for w in widths) + right

    def row(cells: Sequence[str], bars: tuple[str, str, str], bottom: bool) -> list[str]:
        blocks = [[" " * _PAD + s + " " * _PAD for s in _cell_lines(c, w - 2 * _PAD)] for c, w in zip(cells, widths, strict=True)]
        height = max(len(b) for b in blocks)
        blocks = [([" " * w] * (height - len(b)) + b) if bottom else (b + [" " * w] * (height - len(b)))
                  for b, w in zip(blocks, widths, strict=True)]
        left, mid, right = bars
        return [left + mid.join(b[i] for b in blocks) + right for i in range(height)]

    out.append(rule(_TOP))
    out += row(headers, _HEAD_ROW, True)
    out.append(rule(_HEAD_RULE))
    for r in rows:
        out += row(r, _ROW, False)
    out.append(rule(_BOTTOM))
    return "\n".join(out) + "\n"
