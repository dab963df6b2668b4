"""Errors for user mistakes: one line that names the file, the place and the problem.

The CLI turns :class:`InputError` into a single line on stderr and exit code 2, never a
traceback, so every reader and validator raises it (and only it) for bad input.
"""

from __future__ import annotations

import warnings


class InputError(Exception):
    """Bad input: names the file, the place in it (row, JSON path, rule path) and the problem."""

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        where: str | None = None,
        column: str | None = None,
    ) -> None:
        self.message = message
        self.file = file
        self.where = where
        self.column = column
        super().__init__(self.one_line())

    def one_line(self) -> str:
        place = ", ".join(
            part
            for part in (
                str(self.file) if self.file else "",
                self.where or "",
                f"column '{self.column}'" if self.column else "",
            )
            if part
        )
        text = f"{place}: {self.message}" if place else self.message
        return " ".join(text.split())


class InputWarning(UserWarning):
    """Suspicious but usable input (for example a service that never appears in usage).

    Emitted with :func:`warnings.warn`; the CLI prints each one as ``warning: ...`` on stderr.
    """


def warn(message: str) -> None:
    """Emit an :class:`InputWarning` (one line)."""
    warnings.warn(" ".join(message.split()), InputWarning, stacklevel=2)


class InternalError(Exception):
    """A broken invariant of tenantcost itself (for example a cascade that does not close).

    Never caused by input alone: the CLI prints it as one ``internal error: ...`` line and exits
    3, so a wrong figure is never printed as if it were a result.
    """
