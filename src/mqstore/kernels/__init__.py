"""mqstore.kernels layer: the compiled (numba) and vectorised hot loops, one concern per module.

Shared pieces: :mod:`.endian` (big-endian integers, word views), :mod:`.crc`, :mod:`.javahash`
(the one Java-hash loop), :mod:`.native`, :mod:`.intrinsics`, :mod:`.threads`; per layout the
packages :mod:`.rocketmq` and :mod:`.kafka`.  Every kernel has a pure-Python twin registered in
:mod:`.registry` (see ``docs/kernels.md``).
"""
