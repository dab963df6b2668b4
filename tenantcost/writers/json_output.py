"""The JSON document of an allocation: every figure, its rule and its place in the cascade.

All amounts are integers in micro-units of the currency (``money.minor_unit_exponent`` = 6),
so the document is exact and its figures add up by integer arithmetic.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from itertools import chain, repeat
from json.encoder import encode_basestring_ascii
from typing import Any

import numpy as np
import pandas as pd

from tenantcost import __version__
from tenantcost.config.keys import describe_key
from tenantcost.kinds import LineKind
from tenantcost.money import MINOR_UNIT_EXPONENT, money_header  # noqa: F401  (re-exported)
from tenantcost.reconcile import (
    cascade,
    exclusion_summary,
    residual_summary,
    unattributed_summary,
)
from tenantcost.result import AllocationResult
from tenantcost.timefmt import iso_z


def client_lines(result: AllocationResult) -> pd.DataFrame:
    """Lines summed over windows: one per client, source, kind and key."""
    lines = result.lines
    if "windows" not in lines:  # window-level lines: each row is one window
        lines = lines.assign(windows=1)
    if lines.empty:
        return lines
    ledger = {"ledger_amount": ("ledger_amount", "sum")} if "ledger_amount" in lines else {}
    grouped = (
        lines.groupby(["client", "kind", "source", "key"], sort=True, observed=True)
        .agg(
            measure=("measure", "sum"),
            total_measure=("total_measure", "sum"),
            amount=("amount", "sum"),
            windows=("windows", "sum"),
            **ledger,
        )
        .reset_index()
    )
    # A period share is the client's measure over the pool's measure in the windows it used.
    grouped["share"] = grouped["measure"] / grouped["total_measure"]
    direct = grouped["kind"] == LineKind.DIRECT
    grouped.loc[direct, ["measure", "total_measure"]] = float("nan")
    grouped.loc[direct, "share"] = 1.0
    return grouped


def _num(value: float) -> float | None:
    return None if pd.isna(value) else round(float(value), 9)


def rules_in_force(result: AllocationResult) -> list[dict[str, Any]]:
    return [
        {
            "id": r.id,
            "effective_from": r.effective_from.date().isoformat(),
            "description": r.description,
            "idle": r.idle,
            "unmatched": r.unmatched,
            "workloads": [
                {
                    "match": dict(w.match),
                    "class": w.class_,
                    **({"service": w.service} if w.service else {}),
                    **({"key": describe_key(w.key)} if w.key is not None else {}),
                    **({"client": w.client} if w.client else {}),
                    **({"client_from": w.client_from} if w.client_from else {}),
                    **({"reason": w.reason} if w.reason else {}),
                }
                for w in r.workloads
            ],
            "external": [
                {
                    "name": e.name,
                    "amount": str(e.amount),
                    "per": e.per,
                    "key": describe_key(e.key),
                    "services": e.services or r.shared_services,
                }
                for e in r.external
            ],
        }
        for r in result.rules
    ]


def _rounded(values: pd.Series) -> list[float | None]:
    """:func:`_num` of every value (Python's correctly rounded ``round``, as one list)."""
    return [None if v != v else round(v, 9) for v in values.astype("float64").tolist()]


def _line_records(grouped: pd.DataFrame) -> dict[str, list[dict[str, Any]]]:
    """Each client's line documents, in ``grouped``'s order (sorted by client): the columns
    are converted once for all lines, then cut at the client boundaries."""
    key = grouped["key"].astype(object)
    frame = pd.DataFrame(
        {
            "source": grouped["source"].astype(object),
            "kind": grouped["kind"].astype(object),
            "key": key.where(key.astype(bool), None),
            "measure": pd.Series(_rounded(grouped["measure"]), dtype=object),
            "share": pd.Series(_rounded(grouped["share"]), dtype=object),
            "amount": grouped["amount"].astype("int64").to_numpy(),
            **(
                {"ledger_amount": grouped["ledger_amount"].astype("int64").to_numpy()}
                if "ledger_amount" in grouped
                else {}
            ),
            "windows": grouped["windows"].astype("int64").to_numpy(),
        }
    )
    records = frame.to_dict("records")
    clients = grouped["client"].astype(str).to_numpy()
    starts = np.flatnonzero(np.r_[True, clients[1:] != clients[:-1]])
    ends = np.r_[starts[1:], len(clients)]
    return {str(clients[a]): records[a:b] for a, b in zip(starts, ends, strict=True)}


def _client_documents(result: AllocationResult) -> list[dict[str, Any]]:
    """Each client's total and its lines, largest client first (one group-by and one
    conversion of all lines, not one scan or one ``itertuples`` per client)."""
    return client_documents(result.client_totals(), client_lines(result))


def client_documents(totals: pd.DataFrame, grouped: pd.DataFrame) -> list[dict[str, Any]]:
    """The ``clients`` part of the document from :meth:`AllocationResult.client_totals`
    and :func:`client_lines` (the reference that :func:`clients_json` writes fast)."""
    lines_by_client = _line_records(grouped) if not grouped.empty else {}
    ledger = totals["ledger_amount"].tolist() if "ledger_amount" in totals else None
    return [
        {
            "client": client,
            "amount": int(amount),
            **({"ledger_amount": int(ledger[i])} if ledger is not None else {}),
            "lines": lines_by_client.get(str(client), []),
        }
        for i, (client, amount) in enumerate(
            zip(totals["client"].tolist(), totals["amount"].tolist(), strict=True)
        )
    ]


def reconciliation_document(result: AllocationResult) -> dict[str, Any]:
    """The cascade and everything it is made of (``reconcile --format json`` and
    ``reconciliation.json``), without the per-client lines."""
    casc = cascade(result)
    document = {
        "tenantcost_version": __version__,
        "currency": result.currency,
        "money": money_header(result.currency),
        **({"fx": result.fx} if result.fx is not None else {}),
        "period": {"start": iso_z(result.period.start), "end": iso_z(result.period.end)},
        "rules": rules_in_force(result),
        "key_override": result.key_override,
        "reference_total": result.reference_total,
        "opencost_total": result.cost_total,
        "external_total": result.external_total,
        "unattributed": int(result.unattributed["amount"].sum()),
        "unattributed_detail": unattributed_summary(result),
        "residual": residual_summary(result),
        "exclusions": exclusion_summary(result),
        "unclassified": int(result.unclassified["amount"].sum()),
        "cascade": [
            {"line": c.label, "kind": c.kind, "amount": c.amount, "detail": c.detail}
            for c in casc.lines
        ],
        "gap": casc.gap,
        **_invoice_fields(result),
    }
    return _with_ledger(document, result)


def _with_ledger(document: dict[str, Any], result: AllocationResult) -> dict[str, Any]:
    """A converted result's document with each figure's ledger amount beside it:
    ``ledger_amount`` on the cascade's lines and the detail lists, and
    ``ledger_reference_total`` (the ledger document is computed the same way, so its lists
    come in the same order)."""
    if result.ledger is None:
        return document
    ledger = reconciliation_document(result.ledger)
    for part in ("cascade", "unattributed_detail", "residual", "exclusions"):
        for item, own in zip(document[part], ledger[part], strict=True):
            item["ledger_amount"] = own["amount"]
    at = list(document).index("reference_total")
    items = list(document.items())
    items.insert(at + 1, ("ledger_reference_total", ledger["reference_total"]))
    return dict(items)


def _invoice_fields(result: AllocationResult) -> dict[str, Any]:
    """With billing data: ``billed_total``, ``opencost_estimate`` (OpenCost's figure before
    repricing) and the ``invoice`` cascade; nothing otherwise (documents stay as they were)."""
    if result.invoice is None:
        return {}
    return {
        "billed_total": result.invoice["billed_total"],
        "opencost_estimate": result.invoice["opencost_estimate"],
        "invoice": result.invoice,
    }


def result_document(result: AllocationResult) -> dict[str, Any]:
    """The full JSON-ready document of one allocation: the reconciliation plus the clients."""
    return {**result_document_without_clients(result), "clients": _client_documents(result)}


def result_json(result: AllocationResult) -> str:
    """``json.dumps(result_document(result), indent=2)``, byte for byte, but fast.

    The standard library's encoder is pure Python as soon as ``indent`` is given, and the
    ``clients`` part holds one small object per client line (hundreds of thousands for a large
    month): that part is written column-wise by :func:`clients_json`, the rest (small) by
    ``json.dumps``. Anything :func:`clients_json` does not handle falls back to the reference.
    """
    head = result_document_without_clients(result)
    clients = clients_json(result.client_totals(), client_lines(result))
    if clients is None:
        return json.dumps(result_document(result), indent=2)
    text = json.dumps({**head, "clients": []}, indent=2)
    tail = '"clients": []\n}'
    if not text.endswith(tail):  # pragma: no cover - "clients" is always the last key
        return json.dumps(result_document(result), indent=2)
    return text[: -len(tail)] + '"clients": ' + clients + "\n}"


def result_document_without_clients(result: AllocationResult) -> dict[str, Any]:
    """:func:`result_document` up to (not including) its ``clients``."""
    recon = reconciliation_document(result)
    first = ("tenantcost_version", "currency", "money", "fx", "period")
    head: dict[str, Any] = {k: recon[k] for k in first if k in recon}
    return {
        **head,
        "windows": result.windows,
        "hours": result.hours,
        **{k: v for k, v in recon.items() if k not in head},
    }


_LINE_FIELDS = ("source", "kind", "key", "measure", "share", "amount", "windows")
_CONVERTED_LINE_FIELDS = (
    "source", "kind", "key", "measure", "share", "amount", "ledger_amount", "windows"
)  # fmt: skip


def _indent(level: int) -> str:
    return "  " * level


def _strings(values: pd.Series) -> list[str]:
    """JSON strings as ``json.dumps`` writes them (``ensure_ascii``); TypeError on a non-str."""
    return list(map(encode_basestring_ascii, values.astype(object).tolist()))


def _floats(values: pd.Series) -> np.ndarray:
    """:func:`_rounded` values as ``json.dumps`` writes them (``float.__repr__``, NaN as
    ``null`` like :func:`_rounded`, infinities as ``Infinity``)."""
    array = values.astype("float64").to_numpy()
    rounded = list(map(round, array.tolist(), repeat(9)))
    texts = np.array(list(map(float.__repr__, rounded)), dtype=object)
    texts[np.isnan(array)] = "null"
    texts[np.isposinf(array)] = "Infinity"
    texts[np.isneginf(array)] = "-Infinity"
    return texts


def _ints(values: pd.Series) -> list[str]:
    return list(map(int.__repr__, values.astype("int64").tolist()))


def _line_objects(grouped: pd.DataFrame) -> np.ndarray:
    """Each line's JSON object (as :func:`_line_records` makes it) at nesting level 4,
    written column-wise: every value converted by one ``map`` per column."""
    key = grouped["key"].astype(object)
    empty = ~key.astype(bool).to_numpy()
    keys = np.array(_strings(key.where(~empty, "")), dtype=object)
    keys[empty] = "null"
    columns: list[Iterable[str]] = [
        _strings(grouped["source"]),
        _strings(grouped["kind"]),
        keys,
        _floats(grouped["measure"]),
        _floats(grouped["share"]),
        _ints(grouped["amount"]),
        _ints(grouped["windows"]),
    ]
    names: tuple[str, ...] = _LINE_FIELDS
    if "ledger_amount" in grouped:
        columns.insert(6, _ints(grouped["ledger_amount"]))
        names = _CONVERTED_LINE_FIELDS
    pieces: list[Iterable[str]] = []
    for i, (name, column) in enumerate(zip(names, columns, strict=True)):
        pieces += [repeat(("{\n" if i == 0 else ",\n") + f'{_indent(5)}"{name}": '), column]
    pieces.append(repeat("\n" + _indent(4) + "}"))
    # repeat() is endless: the columns (all of one length) end the zip
    return np.array(list(map("".join, zip(*pieces, strict=False))), dtype=object)


def clients_json(totals: pd.DataFrame, grouped: pd.DataFrame) -> str | None:
    """``json.dumps(client_documents(totals, grouped), indent=2)`` as the value of the
    document's top-level ``clients`` key (nesting level 1), or None where it would differ
    (a client without lines, a line without a client, a value that is not a string):
    the caller then uses the reference.

    Lines are put in client order by one stable sort; each client's head is glued to its
    first line and its closing brackets to its last, so the text is one ``join``.
    """
    if totals.empty:
        return "[]"
    names = pd.Index(totals["client"].astype(str))
    order = names.get_indexer(grouped["client"].astype(str)) if names.is_unique else None
    if order is None or (order < 0).any():
        return None
    counts = np.bincount(order, minlength=len(names))
    if (counts == 0).any():
        return None
    try:
        objects = _line_objects(grouped)[np.argsort(order, kind="stable")]
        clients = np.array(_strings(totals["client"]), dtype=object)
    except TypeError:
        return None
    i2, i3, i4 = _indent(2), _indent(3), _indent(4)
    separators = np.full(len(names), ",\n" + i2, dtype=object)
    separators[0] = "[\n" + i2
    amounts = np.array(_ints(totals["amount"]), dtype=object)
    heads = separators + f'{{\n{i3}"client": ' + clients + f',\n{i3}"amount": ' + amounts
    if "ledger_amount" in totals:
        heads = (
            heads
            + f',\n{i3}"ledger_amount": '
            + np.array(_ints(totals["ledger_amount"]), dtype=object)
        )
    ends = np.cumsum(counts)
    lead = np.full(len(objects), ",\n" + i4, dtype=object)
    lead[ends - counts] = heads + f',\n{i3}"lines": [\n{i4}'
    trail = np.full(len(objects), "", dtype=object)
    trail[ends - 1] = f"\n{i3}]\n{i2}}}"
    text = "".join(chain.from_iterable(zip(lead, objects, trail, strict=True)))
    return text + "\n" + _indent(1) + "]"
