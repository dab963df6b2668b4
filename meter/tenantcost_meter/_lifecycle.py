"""Process exit: the meters of this process flush at ``atexit`` and on SIGTERM.

SIGTERM is what Kubernetes and process managers send before SIGKILL. The handler is installed
once, and only from the main thread (Python allows no other). It spools and delivers every
live meter's cells, then does what the previous handler would have done:

* a Python handler (uvicorn's, gunicorn's...) is called: the server shuts down gracefully;
  until the process ends, every request that completes is spooled and delivered at once
  (the meter is "terminating"), because servers such as uvicorn end by restoring the default
  handler and raising SIGTERM again, which skips ``atexit``;
* SIG_IGN: nothing more (the signal stays ignored);
* SIG_DFL (or a handler Python cannot call): the default handler is restored and the signal
  sent again, so the process dies of SIGTERM as it would have without the meter. Before the
  flush, the handler waits up to ``DRAIN_SECONDS`` for the WSGI responses already begun to be
  closed: a server such as waitress writes the response, and the client has its answer,
  before it closes the body where the request is counted; without the wait an answered
  request could die uncounted.

A handler interrupts the main thread between two bytecodes, possibly inside the meter's own
lock; it then does not wait for itself: the termination is deferred to the moment that
thread leaves the meter (``kill_if_pending``).
"""

from __future__ import annotations

import atexit
import os
import signal
import threading
import time
import weakref
from types import FrameType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._meter import Meter

_meters: weakref.WeakSet[Meter] = weakref.WeakSet()
_previous: Any = None
_at_exit_registered = False
_sigterm_installed = False
_kill_pending: int | None = None
_lock = threading.Lock()

LOCK_SECONDS = 1.0
"""How long the handler waits for a flusher thread to finish spooling what it drained."""

DRAIN_SECONDS = 2.0
"""How long a SIGTERM about to kill the process waits for begun WSGI responses to close."""


def register(meter: Meter) -> None:
    """Flush ``meter`` at exit and on SIGTERM (installs the handlers once per process)."""
    global _at_exit_registered
    _meters.add(meter)
    with _lock:
        if not _at_exit_registered:
            atexit.register(_at_exit)
            _at_exit_registered = True
        _install_sigterm()


def unregister(meter: Meter) -> None:
    _meters.discard(meter)


def _install_sigterm() -> None:
    global _previous, _sigterm_installed
    if _sigterm_installed or threading.current_thread() is not threading.main_thread():
        return  # signal.signal works only in the main thread; atexit covers normal exits
    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    _previous = signal.SIG_DFL if previous is None else previous
    _sigterm_installed = True


def _at_exit() -> None:
    for meter in list(_meters):
        meter.close(timeout=meter.exit_seconds)


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    global _kill_pending
    complete = True
    previous = _previous
    if not callable(previous) and previous != signal.SIG_IGN:
        _drain(time.monotonic() + DRAIN_SECONDS)
    for meter in list(_meters):
        meter._terminating = True
        complete = meter._flush_at_exit(lock_seconds=LOCK_SECONDS) and complete
    if callable(previous):
        previous(signum, frame)
    elif previous == signal.SIG_IGN:
        return
    elif complete:
        _die(signum)
    else:
        _kill_pending = signum


def _drain(deadline: float) -> None:
    """Until ``deadline``, let the server's threads close the responses they began (a request
    served by the interrupted main thread itself cannot close: the wait then runs out)."""
    while any(meter._open > 0 for meter in list(_meters)) and time.monotonic() < deadline:
        time.sleep(0.005)


def kill_if_pending() -> None:
    """Terminate now if a SIGTERM had to wait for this thread to leave the meter."""
    signum = _kill_pending
    if signum is not None and threading.current_thread() is threading.main_thread():
        for meter in list(_meters):
            meter._flush_at_exit(lock_seconds=LOCK_SECONDS)
        _die(signum)


def _die(signum: int) -> None:
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def after_fork_in_child() -> None:
    """A forked worker (gunicorn --preload) installs nothing anew: handlers and atexit are
    inherited; its meters restart their own state (``Meter._after_fork``)."""
    global _kill_pending
    _kill_pending = None
