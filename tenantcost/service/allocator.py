"""How the server process allocates memory: large blocks given back when freed.

Why: a request that reads a large body builds column arrays of 100,000 values (800 KB each)
and frees them step after step. Two allocators kept what was freed instead of reusing it or
giving it back, so the server's peak memory was the sum of a request's steps, not its
largest one (issue 34: an accepted OTLP export of 100,000 points grew the server by about
150 MiB; the target is under 100 MiB for any body under ``--max-body``):

* **Arrow** (pandas keeps text columns in Arrow) allocates from its own pool, mimalloc by
  default, which keeps freed pages for Arrow alone, per thread. The server puts Arrow on the
  C library's allocator, as Python's objects are, unless ``ARROW_DEFAULT_MEMORY_POOL`` says
  otherwise: 31 MiB less at the peak of that export (docs/service.md, limits);
* **glibc** maps a block of 128 KB or more on its own (given back when freed), but raises
  that threshold each time such a block is freed, up to 32 MiB: after the first request,
  every column array came from the heap, which fragments and is never given back. The
  threshold is fixed at :data:`MMAP_THRESHOLD` (``mallopt``; a no-op off glibc, and left
  alone if ``MALLOC_MMAP_THRESHOLD_`` is set): 8 MiB less at that export's peak, and
  about 40 MiB given back once it is answered.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os

log = logging.getLogger("tenantcost.service.allocator")
MMAP_THRESHOLD = 256 * 1024
"""Blocks from this size up are mapped on their own, and unmapped when freed."""
M_MMAP_THRESHOLD = -3
"""``mallopt``'s parameter number (glibc ``malloc.h``)."""


def configure() -> None:
    """Apply both settings to this process (once per worker, before its first request)."""
    import pyarrow as pa

    if not os.environ.get("ARROW_DEFAULT_MEMORY_POOL"):
        pa.set_memory_pool(pa.system_memory_pool())
    if os.environ.get("MALLOC_MMAP_THRESHOLD_"):
        return
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc: its own allocator's behaviour stands
        return
    if mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD) != 1:
        log.warning("mallopt(M_MMAP_THRESHOLD) failed: large requests may use more memory")
