"""The one rule for option names the Spark sources do not know (pure, no Spark).

Both sources (``kafka-log``, ``rocketmq``) take option names case-insensitively and refuse a name
they do not know with one line that names it and the nearest valid name, so a typo
(``startingOffset``, ``subExpresion``) fails at ``load()`` instead of being silently ignored.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from mqstore.errors import InvalidArgumentError

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa


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


def refuse_custom_schema(source: str, given: Any, expected: pa.Schema) -> None:
    """Spark's rule for its Kafka source (and rocketmq-spark's): the columns are fixed, so a
    ``.schema(...)`` other than the source's own is refused (``given``: the StructType PySpark
    hands the reader; ``expected``: the Arrow schema the source produces)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    try:
        got = to_arrow_schema(given, timezone="UTC")
    except Exception:  # a type Arrow cannot take: certainly not ours
        got = None
    if got is None or not got.equals(expected, check_metadata=False):
        raise InvalidArgumentError(f"the {source} source has a fixed schema and cannot be set with a custom one "
                                   "(drop .schema(...); select or cast columns instead)")
