"""The aggregate the meter keeps until it is spooled: one cell per (UTC hour, service, client).

Why cells and not events: the store needs hourly sums per client and service (the usage
columns the rule files use as keys), and memory must stay bounded whatever the request rate.
A request costs one dict update under a lock (O(1)); ``take`` swaps the dict out under the
lock and the records are built outside it, so request threads never wait for a flush.

Cells that could not be spooled (a full disk, a removed spool folder) are put back with
``put_back`` and merged with the cells counted since, so the next flush writes them again:
usage the spool refused is not lost, and it is not counted twice (nothing of it was spooled).
Memory is bounded by ``max_cells``: past it, the cells of the oldest hours are dropped whole
(the newest hours are the ones still likely to be written), and the caller logs the count.

A request belongs to the UTC hour in which it completes: ``hour`` is ``int(time() // 3600)``
taken at completion by the caller (``Meter._add``). The declared metrics (``Meter(metrics=)``:
database seconds, tokens...) are added to their cell as they are counted (``add_value``): a
database call belongs to the hour in which it completes, whatever the request's.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any

Key = tuple[int, str, str]
"""(hour since the epoch, service, client)."""

Taken = dict[Key, list[Any]]
"""Cells taken out of the aggregate: key -> [requests, cpu seconds, body bytes, then one sum
per declared metric]."""

FIRST_METRIC = 3
"""The position of the first declared metric in a cell."""

MAX_CELLS = 100_000
"""Default cap on the cells held in memory (about 23 MB; see docs/meter.md)."""


@dataclass(frozen=True)
class Dropped:
    """What the cap threw away: cells, their requests and CPU seconds, and their hours."""

    cells: int
    requests: int
    cpu_seconds: float
    first_hour: int
    last_hour: int

    def describe(self) -> str:
        span = hour_text(self.first_hour)
        if self.last_hour != self.first_hour:
            span += f" to {hour_text(self.last_hour)}"
        return (f"{self.cells} cells ({self.requests} requests, {self.cpu_seconds:.6f} CPU "
                f"seconds) of the hours {span}")  # fmt: skip


class Cells:
    """Thread-safe sums of requests, CPU seconds, (optionally) body bytes and the declared
    ``metrics`` per cell, at most ``max_cells`` of them. Every record carries every declared
    metric (0 where nothing was counted)."""

    def __init__(self, bytes_out: bool = False, max_cells: int = MAX_CELLS,
                 metrics: tuple[str, ...] = ()) -> None:  # fmt: skip
        self.bytes_out = bytes_out
        self.max_cells = max_cells
        self.metrics = metrics
        self._zeros = [0.0] * len(metrics)
        self.lock = threading.Lock()
        self.dropped_cells = 0
        """Cells dropped by the cap since this aggregate was created."""
        self._cells: Taken = {}

    def add(
        self, hour: int, service: str, client: str, requests: int, cpu: float, nbytes: int = 0
    ) -> Dropped | None:
        """Add one measurement to its cell (requests may be 0: CPU that arrived late). What
        the cap dropped, if this new cell took the cells over it (else None)."""
        key = (hour, service, client)
        with self.lock:
            cell = self._cells.get(key)
            if cell is not None:
                cell[0] += requests
                cell[1] += cpu
                cell[2] += nbytes
                return None
            self._cells[key] = [requests, cpu, nbytes, *self._zeros]
            if len(self._cells) <= self.max_cells:
                return None
            return self._trim()

    def add_value(self, key: Key, index: int, value: float) -> Dropped | None:
        """Add ``value`` to the metric at position ``index`` (``FIRST_METRIC`` and after) of
        the cell ``key``; what the cap dropped, as ``add``. (Every database call: short.)"""
        with self.lock:
            cell = self._cells.get(key)
            if cell is not None:
                cell[index] += value
                return None
            cell = [0, 0.0, 0, *self._zeros]
            cell[index] = value
            self._cells[key] = cell
            if len(self._cells) <= self.max_cells:
                return None
            return self._trim()

    def __len__(self) -> int:
        return len(self._cells)

    def take(self, timeout: float = -1) -> Taken | None:
        """Every cell, taken out; None when the lock could not be had within ``timeout``
        seconds (a signal handler that interrupted ``add`` in the same thread must not wait
        for itself)."""
        if not self.lock.acquire(timeout=timeout):
            return None
        try:
            cells, self._cells = self._cells, {}
        finally:
            self.lock.release()
        return cells

    def put_back(self, cells: Taken) -> Dropped | None:
        """Merge cells that could not be spooled with those counted since; what the cap
        dropped, if anything."""
        with self.lock:
            for key, back in cells.items():
                cell = self._cells.get(key)
                if cell is None:
                    self._cells[key] = back
                else:
                    for position, value in enumerate(back):
                        cell[position] += value
            if len(self._cells) <= self.max_cells:
                return None
            return self._trim()

    def _trim(self) -> Dropped:
        """Drop the oldest hours, whole, until at most ``max_cells`` cells remain (the
        caller holds the lock)."""
        per_hour: dict[int, int] = {}
        for hour, _, _ in self._cells:
            per_hour[hour] = per_hour.get(hour, 0) + 1
        remaining, doomed = len(self._cells), set()
        for hour in sorted(per_hour):
            if remaining <= self.max_cells:
                break
            doomed.add(hour)
            remaining -= per_hour[hour]
        kept: Taken = {}
        requests, cpu, count = 0, 0.0, 0
        for key, cell in self._cells.items():
            if key[0] in doomed:
                requests += cell[0]
                cpu += cell[1]
                count += 1
            else:
                kept[key] = cell
        self._cells = kept
        self.dropped_cells += count
        return Dropped(count, int(requests), cpu, min(doomed), max(doomed))

    def records(self, cells: Taken) -> tuple[list[dict[str, Any]], list[Key]]:
        """Usage records of ``cells`` (the contract of ``POST /api/v1/usage``), in key
        order, with each record's key at the same position; empty cells are left out."""
        keys = [key for key in sorted(cells) if any(cells[key])]
        return [self._record(key, cells[key]) for key in keys], keys

    def drain(self, timeout: float = -1) -> list[dict[str, Any]] | None:
        """Take every cell out as usage records (None: the lock was not had in time)."""
        cells = self.take(timeout)
        return None if cells is None else self.records(cells)[0]

    def _record(self, key: Key, cell: list[Any]) -> dict[str, Any]:
        hour, service, client = key
        record: dict[str, Any] = {
            "window_start": hour_text(hour), "window_end": hour_text(hour + 1),
            "service": service, "client": client,
            "requests": int(cell[0]), "cpu_seconds": round(float(cell[1]), 6),
        }  # fmt: skip
        if self.bytes_out:
            record["bytes_out"] = int(cell[2])
        for name, value in zip(self.metrics, cell[FIRST_METRIC:]):
            record[name] = round(float(value), 6)
        return record


def hour_text(hour: int) -> str:
    """``2026-11-12T10:00:00Z`` for an hour since the epoch."""
    return time.strftime("%Y-%m-%dT%H:00:00Z", time.gmtime(hour * 3600))
