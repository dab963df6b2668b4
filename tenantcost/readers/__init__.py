"""Readers: turn each cost or usage source into the canonical tables of ``tenantcost.tables``.

Entry points are :func:`tenantcost.readers.costs.read_costs` and
:func:`tenantcost.readers.usage.read_usage`; the per-format modules (``opencost_json``,
``opencost_csv``, ``canonical``) are usable on their own. Every bad input raises
:class:`tenantcost.errors.InputError` naming the file, the place in it and the column, so the
CLI can print one line instead of a traceback.
"""
