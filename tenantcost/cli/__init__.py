"""The ``tenantcost`` command line: a thin shell over the input path, the core and the writers.

* :mod:`~tenantcost.cli.shell`: the app, one-line errors (exit 2 for bad input, 3 for an
  internal error) and the options every allocating command shares (:class:`RunOptions`);
* :mod:`~tenantcost.cli.commands`: the commands, each a few lines;
* :mod:`~tenantcost.cli.store`: the store's commands (``db upgrade``, ``rules load``,
  ``ingest usage|costs``, ``ingest --since-last``); :mod:`~tenantcost.cli.cycle`: ``run``,
  ``status``, ``close``, ``reopen``, ``history``; :mod:`~tenantcost.cli.batch`: ``batch list``
  and ``batch withdraw``; :mod:`~tenantcost.cli.from_db`: the checks
  of ``report --from-db``; :mod:`~tenantcost.cli.service`: ``serve`` and ``token``;
* :mod:`~tenantcost.cli.economics`: ``unit-economics``, ``catalog load`` and ``fx load``;
  :mod:`~tenantcost.cli.budget`: ``budget plan`` and ``budget load``;
  :mod:`~tenantcost.cli.explain`: ``explain``;
* :mod:`~tenantcost.cli.export`: ``export focus``;
* :mod:`~tenantcost.cli.run`: the one run sequence (load inputs -> open engine -> allocate
  -> check the cascade) and what each command prints; imported only when a command runs.

Each command's ``--help`` ends with the page of ``docs/`` that documents it
(:mod:`~tenantcost.cli.help_pages`); help reads as paragraphs, names values as users know
them and lists the commands in the order of the work (:mod:`~tenantcost.cli.help_format`).

Every user mistake surfaces as one ``error: ...`` line on stderr and exit code 2; warnings
as ``warning: ...`` lines. ``reconcile`` exits 1 when the cascade does not close.
"""

from tenantcost.cli import batch as _batch  # noqa: F401  (registers batch list, batch withdraw)
from tenantcost.cli import budget as _budget  # noqa: F401  (registers budget plan, budget load)
from tenantcost.cli import cycle as _cycle  # noqa: F401  (registers run, status, close, reopen, history)
from tenantcost.cli import economics as _economics  # noqa: F401  (registers unit-economics)
from tenantcost.cli import explain as _explain  # noqa: F401  (registers explain)
from tenantcost.cli import service as _service  # noqa: F401  (registers serve and token)
from tenantcost.cli import store as _store  # noqa: F401  (registers db, rules and ingest)
from tenantcost.cli import watch as _watch  # noqa: F401  (registers watch)
from tenantcost.cli.commands import app
from tenantcost.cli.help_format import format_help
from tenantcost.cli.help_pages import point_help_to_docs

point_help_to_docs(app)  # each command's --help ends with its page of docs/
format_help(app)  # paragraphs, value names users know, commands in work order


def main() -> None:
    """Console-script entry point."""
    app(prog_name="tenantcost")


__all__ = ["app", "main"]
