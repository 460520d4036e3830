"""LLVM intrinsics that numba does not expose, for the compiled kernels.

``prefetch(arr, i)`` asks the CPU to start loading the cache line of ``arr[i]`` (with the intent
to write it) and returns at once.  It changes no value and does not fault (x86-64 and AArch64
drop a prefetch of an unmapped address; the kernels only pass indexes inside the array anyway),
so kernels whose loads are random — the IndexFile's hash slots — issue it a few keys ahead and
overlap the memory latencies of several keys instead of waiting for one at a time: the bulk
IndexFile build went from 5.2 M to 28 M keys/s on one thread.  Targets without a prefetch
instruction compile it to nothing.

``u8_ptr(addr)`` / ``u32_ptr(addr)`` give an ``int64`` address (a view's ``ctypes.data`` handed
over in a table) as a typed pointer for ``numba.carray``: the kernels that walk many files or
segments in one call receive them as rows of addresses and lengths.
"""

from __future__ import annotations

from typing import Any

from llvmlite import ir
from numba import types
from numba.extending import intrinsic

_I8P = ir.IntType(8).as_pointer()
_I32 = ir.IntType(32)
_PREFETCH_TYPE = ir.FunctionType(ir.VoidType(), [_I8P, _I32, _I32, _I32])


@intrinsic
def prefetch(typingctx: Any, arr: Any, idx: Any) -> Any:
    """``llvm.prefetch`` of ``arr[idx]`` (write, high temporal locality, data cache)."""
    if not isinstance(arr, types.Array) or not isinstance(idx, types.Integer):
        return None
    sig = types.void(arr, idx)

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        a, i = args
        ary = context.make_array(signature.args[0])(context, builder, a)
        ptr = builder.bitcast(builder.gep(ary.data, [i]), _I8P)
        fn = builder.module.declare_intrinsic("llvm.prefetch", [_I8P], _PREFETCH_TYPE)
        builder.call(fn, [ptr, ir.Constant(_I32, 1), ir.Constant(_I32, 3), ir.Constant(_I32, 1)])
        return context.get_dummy_value()

    return sig, codegen


def _address_as(item: Any) -> Any:
    """An intrinsic that reads an integer address as a pointer to ``item`` values."""
    ptr_t = types.CPointer(item)

    def as_ptr(typingctx: Any, addr: Any) -> Any:
        if not isinstance(addr, types.Integer):
            return None

        def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
            return builder.inttoptr(args[0], context.get_value_type(ptr_t))

        return ptr_t(addr), codegen

    as_ptr.__name__ = f"{item}_ptr"
    return intrinsic(as_ptr)


u8_ptr = _address_as(types.uint8)
u32_ptr = _address_as(types.uint32)
