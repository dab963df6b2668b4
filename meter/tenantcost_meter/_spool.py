"""The spool: one file per batch, written whole or not at all, taken by one process at a time.

Why files: a batch exists on disk, with its Idempotency-Key, before its first POST. A process
that dies at any point leaves either no file (the batch was never spooled: at most the last
``flush_seconds`` of usage, still in memory, is lost) or a whole file that the next process
delivers, under the same key, so the server replays instead of adding it twice.

- **Atomic.** A batch is written to ``<name>.tmp``, fsync'd, renamed to ``<name>.json``
  (``os.replace``) and the folder fsync'd, so the name is durable too. Readers list only
  ``*.json``: a half-written file is never seen. A ``*.tmp`` left by a crash is removed once
  it is older than :data:`STALE_TMP_SECONDS` (never a young one: another process may be
  writing it right now).
- **Ordered.** Names are ``<time_ns>-<pid>-<seq>.json`` with fixed-width numbers, so sorting
  the names sorts the batches by when they were spooled, across processes; within a process
  the time never goes backwards (a clock step back still sorts later batches later).
- **One deliverer per file.** :func:`taken` holds ``fcntl.flock(LOCK_EX | LOCK_NB)`` on the
  file while it is posted; a file another process holds is skipped, not waited for. A file is
  removed (or moved to ``rejected/``) while its lock is held, and a lock won on a file that
  was removed meanwhile is noticed (the name no longer leads to the locked inode) and skipped,
  so no batch is posted after its removal.
- **Bounded.** Nothing but the batch being posted is held in memory; the backlog is on disk.
"""

from __future__ import annotations

import fcntl
import json
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SUFFIX = ".json"
TMP_SUFFIX = ".tmp"
REJECTED = "rejected"
STALE_TMP_SECONDS = 3600.0
"""A temporary file this old was left by a crash (a write takes milliseconds)."""


@dataclass(frozen=True)
class Spooled:
    """A batch file, locked by this process: its name, key and request body, or what is
    wrong with it (``damaged``: a file edited by hand or a damaged disk; never posted)."""

    path: Path
    key: str
    body: dict[str, Any]
    damaged: str | None = None


class Spool:
    """The spool folder (created if missing) and its ``rejected/`` subfolder."""

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        self.folder = Path(folder)
        self.rejected = self.folder / REJECTED
        self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)  # batches name clients
        self.rejected.mkdir(mode=0o700, exist_ok=True)
        self._names = threading.Lock()
        self._last_ns = 0
        self._seq = 0

    def _next_name(self) -> str:
        with self._names:
            self._last_ns = max(time.time_ns(), self._last_ns + 1)
            self._seq += 1
            return f"{self._last_ns:020d}-{os.getpid():010d}-{self._seq:08d}{SUFFIX}"

    def write(self, batches: list[tuple[str, dict[str, Any]]]) -> list[Path]:
        """Spool ``(key, body)`` batches durably, in order. Their paths, once visible, whole,
        to every reader.

        Every temporary file is written and fsync'd before the first is renamed, so a failure
        while writing (disk full, the folder removed) leaves no batch visible and the caller
        may submit the same records again without counting any of them twice. A rename that
        fails after others succeeded (the folder removed in between) raises
        :class:`PartlyWritten`, saying how many of the first batches are visible. The folder
        is not created again here: a removed spool folder is a fault for its owner to see
        (the meter keeps the usage in memory until the folder is back)."""
        done: list[tuple[Path, Path]] = []
        try:
            for key, body in batches:
                path = self.folder / self._next_name()
                text = json.dumps({"key": key, "body": body}, separators=(",", ":"))
                done.append((_write_synced(path, text), path))
        except BaseException:
            for tmp, _ in done:
                tmp.unlink(missing_ok=True)
            raise
        for count, (tmp, path) in enumerate(done):
            try:
                os.replace(tmp, path)
            except OSError as exc:
                for left, _ in done[count:]:
                    _unlink_quietly(left)
                if count == 0:
                    raise
                raise PartlyWritten(count, exc) from exc
        with suppress(OSError):  # the batches are visible (they will be posted): no failure
            _fsync_folder(self.folder)
        return [path for _, path in done]

    def pending(self) -> list[Path]:
        """The batch files, oldest first (stale temporary files are removed on the way)."""
        names: list[str] = []
        with os.scandir(self.folder) as entries:
            for entry in entries:
                if entry.name.endswith(SUFFIX) and entry.is_file():
                    names.append(entry.name)
                elif entry.name.endswith(TMP_SUFFIX):
                    _remove_if_stale(Path(entry.path))
        return [self.folder / name for name in sorted(names)]

    def reject(self, path: Path, reason: str) -> Path:
        """Move a locked batch file to ``rejected/`` beside a ``.reason`` text file. The
        reason is written first: a crash in between leaves the batch spooled, to be refused
        (and its reason rewritten) again by the next attempt."""
        target = self.rejected / path.name
        self.rejected.mkdir(mode=0o700, exist_ok=True)  # the spool folder may be a new one
        _write_atomically(target.with_suffix(".reason"), reason.rstrip("\n") + "\n")
        os.replace(path, target)
        _fsync_folder(self.folder)
        return target


class PartlyWritten(OSError):
    """Only the first ``written`` batches of a :meth:`Spool.write` became visible."""

    def __init__(self, written: int, cause: OSError) -> None:
        super().__init__(cause.errno, f"{cause.strerror or cause} ({written} batches spooled)")
        self.written = written


def _unlink_quietly(path: Path) -> None:
    with suppress(OSError):
        path.unlink(missing_ok=True)


@contextmanager
def taken(path: Path) -> Iterator[Spooled | None]:
    """The batch at ``path`` locked for this process, or None when another process holds it
    or it is gone (delivered by another process). The lock is released on exit."""
    try:
        fd = os.open(path, os.O_RDWR)
    except FileNotFoundError:
        yield None
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield None
            return
        if not _still_named(fd, path):
            yield None
            return
        yield _read(fd, path)
    finally:
        os.close(fd)  # releases the lock (after any removal done inside the block)


def _still_named(fd: int, path: Path) -> bool:
    """Whether ``path`` still leads to the open file (not removed or replaced meanwhile)."""
    try:
        named = os.stat(path)
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (named.st_dev, named.st_ino) == (held.st_dev, held.st_ino)


def _read(fd: int, path: Path) -> Spooled:
    with os.fdopen(os.dup(fd), "rb") as handle:
        raw = handle.read()
    try:
        document = json.loads(raw)
        key, body = document["key"], document["body"]
    except (ValueError, TypeError, KeyError) as exc:
        return Spooled(path, "", {}, damaged=f"not a spooled batch ({exc!r})")
    if not isinstance(key, str) or not key or not isinstance(body, dict):
        return Spooled(path, "", {}, damaged="not a spooled batch (key or body of the wrong type)")
    return Spooled(path, key, body)


def _write_atomically(path: Path, text: str) -> None:
    os.replace(_write_synced(path, text), path)
    _fsync_folder(path.parent)


def _write_synced(path: Path, text: str) -> Path:
    """``text`` in ``<path>.tmp``, fsync'd (not yet renamed); that temporary path."""
    tmp = path.with_name(path.name + TMP_SUFFIX)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(text.encode("utf-8"))
            handle.flush()
            os.fsync(handle.fileno())
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return tmp


def _fsync_folder(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _remove_if_stale(path: Path) -> None:
    try:
        if time.time() - path.stat().st_mtime > STALE_TMP_SECONDS:
            path.unlink()
    except FileNotFoundError:
        pass
