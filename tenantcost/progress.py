"""Progress bars for long runs: on a terminal only, never in pipes, files or tests."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn


def enabled() -> bool:
    """A bar is shown only when stderr is a terminal."""
    return sys.stderr.isatty()


@contextmanager
def chunk_progress(label: str) -> Iterator[Callable[[int, int], None] | None]:
    """Yield a ``(done, total)`` callback that drives a bar, or None when not on a terminal."""
    if not enabled():
        yield None
        return
    columns = (
        TextColumn(f"[bold]{label}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("chunks"),
        TimeElapsedColumn(),
    )
    with Progress(*columns, transient=True) as bar:
        task = bar.add_task(label, total=None)

        def update(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        yield update
