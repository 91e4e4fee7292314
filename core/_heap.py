"""The C heap's free pages, handed back to the system (glibc's ``malloc_trim``)."""

from __future__ import annotations

import ctypes
import functools
import sys
from collections.abc import Callable

__all__ = ["release_free_heap"]


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim``, or None where the C library has none (not Linux, musl)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


def release_free_heap() -> bool:
    """Give the pages the C heap holds free back to the system; whether it could.

    glibc returns freed memory to the system only from the top of its heap: what is
    freed below a block still in use stays resident. A watcher's batches free tens of
    MB at a time (onnxruntime's working memory, numpy arrays, payloads) between blocks
    that live on, so its resident memory crept up by the free pages left between them;
    ``malloc_trim(0)`` hands every free page in every arena back (a few ms)."""
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True
