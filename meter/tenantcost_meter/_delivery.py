"""Delivery of usage batches: spooled to disk before the first POST, posted in order.

(Interface fixed for issue 23; the body is being written on branch i23-delivery.)
"""

from __future__ import annotations

import os
from typing import Any


class Delivery:
    """Spools batches of usage records and posts them to ``POST {url}/api/v1/usage``."""

    def __init__(
        self,
        url: str,
        token: str,
        spool_dir: str | os.PathLike[str],
        *,
        timeout: float = 10.0,
        max_backoff: float = 300.0,
    ) -> None:
        raise NotImplementedError

    def submit(self, records: list[dict[str, Any]]) -> None:
        """Spool ``records`` as batches of one calendar month each (fsync'd, a fresh
        Idempotency-Key each) before any POST. Does not post."""
        raise NotImplementedError

    def deliver(self, deadline: float | None = None) -> bool:
        """Post every spooled batch in order; True when the spool is empty."""
        raise NotImplementedError

    def close(self, timeout: float = 10.0) -> None:
        """Deliver what it can within ``timeout`` seconds; what remains stays spooled."""
        raise NotImplementedError
