"""Tensor maps for TMA (the hgemm track's step 08): 128 bytes that describe a 2-D tensor in global
memory and the box one `cp.async.bulk.tensor` copies from it.

On a GPU the driver encodes them (`cuTensorMapEncodeTiled`, called through ctypes: CuPy does not
wrap it); on the CPU backend the emulator reads its own encoding of the same fields
(gemmlab/runtime/emulator/cuda_shim.h, `TmaField`). Either way the map travels to the kernel as a
128-byte array argument in global memory.
"""
from __future__ import annotations

import ctypes
import functools

import numpy as np

from . import optional
from ..errors import BackendError, InputError

MAP_BYTES = 128
SWIZZLE_128B = 128            # bytes per swizzled row: the only swizzle the course uses
_EMULATOR_MAGIC = 0x414D54424C4D4547  # "GEMLBTMA", as cuda_shim.h's kTmaMagic

# CUDA driver enums (cuda.h)
_CU_TENSOR_MAP_DATA_TYPE = {np.dtype(np.float16): 6, np.dtype(np.float32): 7}
_CU_TENSOR_MAP_SWIZZLE_128B = 3
_CU_TENSOR_MAP_L2_PROMOTION_256B = 3


def _check(array, box_rows: int, box_cols: int) -> None:
    if array.ndim != 2:
        raise InputError(f"a tensor map describes a 2-D matrix; this array has shape {tuple(array.shape)}")
    row_bytes = array.shape[1] * array.itemsize
    if row_bytes % 16:
        raise InputError(f"TMA needs rows whose length is a multiple of 16 bytes; a row of this "
                         f"{array.shape[0]}x{array.shape[1]} {array.dtype} matrix is {row_bytes} bytes")
    if box_cols * array.itemsize != SWIZZLE_128B:
        raise InputError(f"a 128-byte-swizzled box is 128 bytes wide: {SWIZZLE_128B // array.itemsize} "
                         f"{array.dtype} columns, not {box_cols}")
    if not 1 <= box_rows <= 256:
        raise InputError(f"a TMA box has 1 to 256 rows, not {box_rows}")


def emulator_map(array: np.ndarray, arg_index: int, box_rows: int, box_cols: int) -> np.ndarray:
    """The emulator's tensor map for `array`, which the kernel receives as argument `arg_index`."""
    _check(array, box_rows, box_cols)
    fields = [_EMULATOR_MAGIC, arg_index, array.itemsize, array.shape[1], array.shape[0],
              array.shape[1] * array.itemsize, box_cols, box_rows, SWIZZLE_128B]
    out = np.zeros(MAP_BYTES // 8, dtype=np.uint64)
    out[:len(fields)] = fields
    return out.view(np.uint8)


@functools.lru_cache(maxsize=1)
def _driver():
    try:
        lib = ctypes.CDLL("libcuda.so.1")
        fn = lib.cuTensorMapEncodeTiled
    except (OSError, AttributeError) as e:
        raise BackendError(f"cannot find cuTensorMapEncodeTiled in the CUDA driver (libcuda.so.1): {e}; "
                           "TMA needs a CUDA 12+ driver") from None
    u32p, u64p = ctypes.POINTER(ctypes.c_uint32), ctypes.POINTER(ctypes.c_uint64)
    fn.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32, ctypes.c_void_p, u64p, u64p, u32p, u32p,
                   ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int]
    fn.restype = ctypes.c_int
    return fn


_device_maps: dict[tuple, object] = {}


def device_map(array, box_rows: int, box_cols: int):
    """A CuPy array holding the driver's tensor map of `array` (a CuPy matrix). Cached by address,
    shape and box: encoding and copying a map per launch would show in the timings."""
    cupy = optional.module("cupy")

    _check(array, box_rows, box_cols)
    key = (cupy.cuda.Device().id, array.data.ptr, array.shape, array.dtype.str, box_rows, box_cols)
    if key not in _device_maps:
        if array.data.ptr % 16:
            raise InputError("TMA needs a 16-byte-aligned matrix; copy the view (cupy.ascontiguousarray(x.copy()))")
        host = (ctypes.c_uint64 * (MAP_BYTES // 8))()
        dims = (ctypes.c_uint64 * 2)(array.shape[1], array.shape[0])        # innermost first
        strides = (ctypes.c_uint64 * 1)(array.shape[1] * array.itemsize)    # bytes, all but the innermost
        box = (ctypes.c_uint32 * 2)(box_cols, box_rows)
        steps = (ctypes.c_uint32 * 2)(1, 1)
        err = _driver()(host, _CU_TENSOR_MAP_DATA_TYPE[array.dtype], 2, ctypes.c_void_p(array.data.ptr), dims,
                        strides, box, steps, 0, _CU_TENSOR_MAP_SWIZZLE_128B, _CU_TENSOR_MAP_L2_PROMOTION_256B, 0)
        if err:
            raise BackendError(f"cuTensorMapEncodeTiled failed with CUresult {err} for a {array.shape} "
                               f"{array.dtype} matrix and a {box_rows}x{box_cols} box")
        if len(_device_maps) > 64:
            _device_maps.clear()
        _device_maps[key] = cupy.asarray(np.frombuffer(bytes(host), dtype=np.uint8))
    return _device_maps[key]


def tensor_map(backend: str, array, arg_index: int, box_rows: int, box_cols: int):
    """The tensor map of `array` for `backend` ('gpu' or 'cpu')."""
    if backend == "gpu":
        return device_map(array, box_rows, box_cols)
    return emulator_map(array, arg_index, box_rows, box_cols)
