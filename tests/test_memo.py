"""The per-worker memo (tenantcost.service.memo): readers arriving together on a cold key wait
for one computation, and a failed computation is not kept."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from tenantcost.service.memo import remembered


class _Engine:
    """Only its identity keys the memo; ``version`` stands in for the store's generation."""


def test_eight_readers_at_once_compute_a_cold_value_once() -> None:
    engine, calls, gate = _Engine(), [], threading.Barrier(8)

    def compute() -> list[int]:
        calls.append(1)
        time.sleep(0.2)  # long enough for every reader to arrive while it runs
        return [len(calls)]

    def read(_: int) -> list[int]:
        gate.wait()
        return remembered(engine, "doc", ("m",), compute, version=lambda: 1)  # type: ignore[arg-type]

    with ThreadPoolExecutor(8) as pool:
        values = list(pool.map(read, range(8)))
    assert calls == [1]
    assert all(v is values[0] for v in values)
    # a new generation computes again
    assert remembered(engine, "doc", ("m",), compute, version=lambda: 2) == [2]  # type: ignore[arg-type]


def test_a_failed_computation_is_not_kept() -> None:
    engine, tries = _Engine(), []

    def compute() -> str:
        tries.append(1)
        if len(tries) == 1:
            raise RuntimeError("store unreachable")
        return "ok"

    with pytest.raises(RuntimeError):
        remembered(engine, "doc", (), compute, version=lambda: 1)  # type: ignore[arg-type]
    assert remembered(engine, "doc", (), compute, version=lambda: 1) == "ok"  # type: ignore[arg-type]
    assert len(tries) == 2
