"""The ``tenantcost`` command line: a thin shell over the input path, the core and the writers.

* :mod:`~tenantcost.cli.shell`: the app, one-line errors (exit 2 for bad input, 3 for an
  internal error) and the options every allocating command shares (:class:`RunOptions`);
* :mod:`~tenantcost.cli.commands`: the commands, each a few lines;
* :mod:`~tenantcost.cli.store`: the store's commands (``db upgrade``, ``rules load``,
  ``ingest usage|costs``); :mod:`~tenantcost.cli.cycle`: ``run`` and ``status``;
* :mod:`~tenantcost.cli.run`: the one run sequence (load inputs -> open engine -> allocate
  -> check the cascade) and what each command prints; imported only when a command runs.

Every user mistake surfaces as one ``error: ...`` line on stderr and exit code 2; warnings
as ``warning: ...`` lines. ``reconcile`` exits 1 when the cascade does not close.
"""

from tenantcost.cli import cycle as _cycle  # noqa: F401  (registers run and status)
from tenantcost.cli import store as _store  # noqa: F401  (registers db and rules)
from tenantcost.cli.commands import app


def main() -> None:
    """Console-script entry point."""
    app(prog_name="tenantcost")


__all__ = ["app", "main"]
