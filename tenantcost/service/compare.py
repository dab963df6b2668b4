"""``GET /api/v1/months/{M}/compare``: every client's amount under other keys.

Like ``tenantcost compare`` on the files, but on the month's current stored inputs and the
store's rules (the allocation is computed, not recorded: a comparison is a question, not a
run). Finance and admin only: it shows every client's figure.
"""

from __future__ import annotations

from typing import Any

from tenantcost.store.data import Store


def compare_month(store: Store, month: str, keys: list[str]) -> dict[str, Any]:
    """The ``compare --format json`` document of ``month`` under ``keys``."""
    from tenantcost.allocate import allocate_stream
    from tenantcost.errors import InputError
    from tenantcost.split import connect
    from tenantcost.store.billing import stored_billing_run
    from tenantcost.store.runs import month_inputs, stored_rules
    from tenantcost.store.stored import stored_costs, stored_usage
    from tenantcost.windows import Period
    from tenantcost.writers.compare import compare_document

    period = Period.month(month)
    with store.engine.connect() as connection:
        inputs = month_inputs(connection, period)
    if not (inputs["kind"] == "costs").any():
        raise InputError(f"no costs stored for {month}: nothing to compare")
    rules = stored_rules(store.engine)
    results = {}
    for key in dict.fromkeys(keys):  # one allocation per key asked for (a few)
        con = connect()
        costs = stored_costs(store, period)
        # on billed money when the month has billing data, as `run` allocates it
        billed = stored_billing_run(store, period, con, rules.ruleset, costs,
                                    allow_unbilled=True)  # fmt: skip
        results[key] = allocate_stream(
            billed.costs if billed is not None else costs,
            stored_usage(store, period, con),
            rules.ruleset,
            key=key,
            period=period,
            detail="period",
            rules_origin=rules.origin,
            con=con,
            billed=billed,
        )
    return {"month": month, **compare_document(results)}
