"""The one rule for option names the Spark sources do not know (pure, no Spark).

Both sources (``kafka-log``, ``rocketmq``) take option names case-insensitively and refuse a name
they do not know with one line that names it and the nearest valid name, so a typo
(``startingOffset``, ``subExpresion``) fails at ``load()`` instead of being silently ignored.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

from mqstore.errors import InvalidArgumentError


def nearest(name: str, valid: Iterable[str]) -> str:
    """The valid name closest to ``name`` (case-insensitive similarity, ties by order)."""
    low = name.lower()
    best, score = "", -1.0
    for v in valid:
        s = difflib.SequenceMatcher(None, low, v.lower()).ratio()
        if s > score:
            best, score = v, s
    return best


def refuse_unknown(source: str, given: Iterable[str], valid: Iterable[str], *,
                   prefixes: tuple[str, ...] = (), error: type[InvalidArgumentError] = InvalidArgumentError) -> None:
    """Raise ``error`` for the first name of ``given`` that is neither in ``valid`` (compared
    case-insensitively) nor starts with one of ``prefixes`` (lower case)."""
    names = list(valid)
    known = {v.lower() for v in names}
    for key in given:
        low = str(key).lower()
        if low in known or low.startswith(prefixes):
            continue
        raise error(f"unknown option {key!r} for the {source} source; did you mean {nearest(str(key), names)!r}? "
                    "(options: docs/spark.md)")
