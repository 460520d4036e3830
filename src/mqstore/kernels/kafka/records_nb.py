"""The numba kernels of :mod:`mqstore.kernels.kafka.records` (the development path and the fallback
when the native module ``_nat_kafka`` is not built; imported on first use).  They are the very
functions of :mod:`.records` compiled with ``numba.njit`` (the record walk calls ``varint``
through a copy of its globals that names the compiled one)."""

from __future__ import annotations

import types

from numba import njit

from mqstore.kernels.kafka import records

_varint_nb = njit(cache=True, inline="always")(records._varint_py)
_parse_nb = njit(cache=True)(types.FunctionType(records._parse_bodies.__code__,
                                                {**vars(records), "varint": _varint_nb}, "_parse_bodies"))
_gather_nb = njit(cache=True)(records._gather)
