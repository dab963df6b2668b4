"""The aggregate the meter keeps between flushes: one cell per (UTC hour, service, client).

Why cells and not events: the store needs hourly sums per client and service (the usage
columns the rule files use as keys), and memory must stay bounded by the cells of the hours
not yet delivered, whatever the request rate. A request costs one dict update under a lock
(O(1)); ``drain`` swaps the dict out under the lock and builds the records outside it, so
request threads never wait for a flush.

A request belongs to the UTC hour in which it completes: ``hour`` is ``int(time() // 3600)``
taken at completion by the caller (``Meter._add``).
"""

from __future__ import annotations

import threading
import time
from typing import Any

Key = tuple[int, str, str]
"""(hour since the epoch, service, client)."""


class Cells:
    """Thread-safe sums of requests, CPU seconds and (optionally) body bytes per cell."""

    def __init__(self, bytes_out: bool = False) -> None:
        self.bytes_out = bytes_out
        self.lock = threading.Lock()
        self._cells: dict[Key, list[Any]] = {}

    def add(self, hour: int, service: str, client: str, requests: int, cpu: float,
            nbytes: int = 0) -> None:
        """Add one measurement to its cell (requests may be 0: CPU that arrived late)."""
        key = (hour, service, client)
        with self.lock:
            cell = self._cells.get(key)
            if cell is None:
                self._cells[key] = [requests, cpu, nbytes]
            else:
                cell[0] += requests
                cell[1] += cpu
                cell[2] += nbytes

    def __len__(self) -> int:
        return len(self._cells)

    def drain(self, timeout: float = -1) -> list[dict[str, Any]] | None:
        """Take every cell out as usage records (the contract of ``POST /api/v1/usage``);
        None when the lock could not be had within ``timeout`` seconds (a signal handler
        that interrupted ``add`` in the same thread must not wait for itself)."""
        if not self.lock.acquire(timeout=timeout):
            return None
        try:
            cells, self._cells = self._cells, {}
        finally:
            self.lock.release()
        return [self._record(key, cell) for key, cell in sorted(cells.items())
                if cell[0] or cell[1] or cell[2]]  # fmt: skip

    def _record(self, key: Key, cell: list[Any]) -> dict[str, Any]:
        hour, service, client = key
        record: dict[str, Any] = {
            "window_start": hour_text(hour), "window_end": hour_text(hour + 1),
            "service": service, "client": client,
            "requests": int(cell[0]), "cpu_seconds": round(float(cell[1]), 6),
        }  # fmt: skip
        if self.bytes_out:
            record["bytes_out"] = int(cell[2])
        return record


def hour_text(hour: int) -> str:
    """``2026-11-12T10:00:00Z`` for an hour since the epoch."""
    return time.strftime("%Y-%m-%dT%H:00:00Z", time.gmtime(hour * 3600))
