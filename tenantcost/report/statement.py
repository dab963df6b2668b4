"""What a sheet rendered from the store says about the statement it is.

Revision 1 of a month is the statement as first issued: its sheet is the sheet ``report``
renders from the files, nothing added. A later revision replaces an issued one after the
month was reopened and corrected; a client comparing it with the one it already holds must
read, on the sheet itself, that it is a restatement, why, its amount before and now, and the
difference. A draft (a run not issued) says so, so it is never sent as a statement by
mistake. Why: the reopen's reason is written for finance and may hold other clients' names
and figures that no redaction recognises, so a client's sheet gives the reason finance wrote
for clients (``reopen --client-reason``), through the sheet's redactor like every other text,
or the fixed note "restated by finance" (:func:`tenantcost.report.privacy.client_note`). The
finance summary gives both.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum

from tenantcost.report.display import format_amount, format_units
from tenantcost.report.privacy import RESTATED_NOTE, client_note


class StatementKind(StrEnum):
    """Why a sheet carries a statement block."""

    ISSUED = "issued"
    """Revision 1, issued for an incomplete month (``close --allow-incomplete``)."""
    RESTATED = "restated"
    """An issued revision after the first: it replaces the previous revision."""
    DRAFT = "draft"
    """A run's figures that no close issued (``report --from-db --draft`` or ``--run``)."""


@dataclass(frozen=True)
class ClientRestatement:
    """A client's amounts at the previous revision and at this one (micro-units)."""

    previous: int | None
    """``None`` for a client new in this revision."""
    amount: int
    difference: int


@dataclass(frozen=True)
class StatementNote:
    """The pack-wide facts of a draft or restated revision (per-client amounts included)."""

    kind: StatementKind
    month: str
    run_id: str
    revision: int
    """The revision rendered (restated), or the latest issued one (draft; 0 if none)."""
    reason: str = ""
    """The reopen's reason: finance's only (the summary), never on a client's sheet."""
    issued_at: str = ""
    incomplete: str = ""
    """What the month lacked when this revision was issued (``close --allow-incomplete``)."""
    clients: dict[str, ClientRestatement] = field(default_factory=dict)
    client_reason: str = ""
    """What clients read instead of ``reason`` (empty: :data:`RESTATED_NOTE`)."""
    previous_shown: dict[str, int] = field(default_factory=dict)
    """Each client's figure as the previous revision's pages showed it (display units at
    ``previous_places``): a restatement quotes what the client was sent, not a new rounding."""
    previous_places: int | None = None


@dataclass(frozen=True)
class StatementRow:
    label: str
    value: str


@dataclass(frozen=True)
class StatementView:
    """The block a sheet shows above its lines (empty for revision 1 and the file sheets)."""

    kind: str
    title: str
    text: str
    rows: list[StatementRow]


def _signed(amount: int, places: int) -> str:
    text = format_amount(amount, places)
    return f"+{text}" if amount > 0 else text


def _signed_units(units: int, places: int) -> str:
    text = format_units(units, places)
    return f"+{text}" if units > 0 else text


def _figures(
    note: StatementNote, client: str, c: ClientRestatement, places: int, shown: int | None
) -> list[str]:
    """Before, now and the difference as the pages read them: the previous revision's
    displayed figure, this one's (``shown``, display units), and their difference, so the
    three add up; each rounded alone when a displayed figure is not known or the two
    revisions show different decimals."""
    before = note.previous_shown.get(client) if note.previous_places == places else None
    if shown is not None and (before is not None or c.previous is None):
        return [
            format_units(before, places) if before is not None else "none issued",
            format_units(shown, places),
            _signed_units(shown - (before or 0), places),
        ]
    return [
        format_amount(c.previous, places) if c.previous is not None else "none issued",
        format_amount(c.amount, places),
        _signed(c.difference, places),
    ]


def _incomplete(note: StatementNote) -> str:
    if not note.incomplete:
        return ""
    return (
        f" It was issued for an incomplete month ({note.incomplete}): its figures cover only "
        "the hours with data."
    )


def _draft(note: StatementNote) -> StatementView:
    issued = (
        f"the latest issued statement of {note.month} is revision {note.revision}"
        if note.revision
        else f"{note.month} has no issued statement yet"
    )
    return StatementView(
        kind=str(note.kind),
        title="Draft: not an issued statement",
        text=(
            f"These figures are those of run {note.run_id}, which no close issued; {issued}. "
            "Do not send this sheet as a statement."
        ),
        rows=[],
    )


def statement_view(
    note: StatementNote | None,
    client: str,
    places: int,
    redact: Callable[[str], str],
    shown: int | None = None,
) -> StatementView | None:
    """The sheet's statement block for ``client``, or ``None`` (a complete revision 1, file
    sheets); ``shown``: the client's total as the sheet shows it (display units)."""
    if note is None:
        return None
    if note.kind == StatementKind.DRAFT:
        return _draft(note)
    if note.kind == StatementKind.ISSUED:
        return StatementView(
            kind=str(note.kind),
            title=f"Issued for an incomplete month: revision {note.revision} of {note.month}",
            text=redact(
                f"Revision {note.revision} was issued at {note.issued_at}." + _incomplete(note)
            ),
            rows=[],
        )
    mine = note.clients.get(client)
    rows = []
    change = "Your amount is unchanged."
    if mine is not None:
        before, now, difference = _figures(note, client, mine, places, shown)
        rows = [
            StatementRow(f"Revision {note.revision - 1} (as issued before)", before),
            StatementRow(f"Revision {note.revision} (this statement)", now),
            StatementRow("Difference", difference),
        ]
        if mine.difference:
            change = f"Your amount changed by {difference}."
    return StatementView(
        kind=str(note.kind),
        title=f"Restated statement: revision {note.revision} of {note.month}",
        text=(
            f"This statement replaces revision {note.revision - 1}, which stays on record as "
            "issued. The month was reopened for this reason: "
            f"{client_note(note.client_reason, redact)}. "
            f"Revision {note.revision} was issued at {note.issued_at}. {change}" + _incomplete(note)
        ),
        rows=rows,
    )


@dataclass(frozen=True)
class SummaryStatement:
    """The finance summary's statement block: every client's amounts at the previous and at
    this revision (finance sees every client; the reason is not redacted here, and what the
    clients' sheets say instead follows it)."""

    kind: str
    title: str
    text: str
    columns: list[str]
    rows: list[tuple[str, list[str]]]


def summary_statement(
    note: StatementNote | None, places: int, shown: dict[str, int] | None = None
) -> SummaryStatement | None:
    """The summary's block for a draft, an incomplete or a restated revision, else ``None``;
    ``shown``: each client's total as the pages show it (display units)."""
    if note is None:
        return None
    view = statement_view(note, "", places, lambda text: text)
    assert view is not None
    if note.kind != StatementKind.RESTATED:
        return SummaryStatement(view.kind, view.title, view.text, [], [])
    text = (
        f"This statement replaces revision {note.revision - 1}, which stays on record as "
        f"issued. The month was reopened for this reason: {note.reason or '(none given)'}. "
        f"The clients' sheets say instead: {note.client_reason or RESTATED_NOTE}. "
        f"Revision {note.revision} was issued at {note.issued_at}." + _incomplete(note)
    )
    columns = [f"Revision {note.revision - 1}", f"Revision {note.revision}", "Difference"]
    rows = [
        (client, _figures(note, client, c, places, (shown or {}).get(client)))
        for client, c in note.clients.items()
    ]  # the summary lists every client anyway
    return SummaryStatement(view.kind, view.title, text, columns, rows)


__all__ = [
    "ClientRestatement",
    "StatementKind",
    "StatementNote",
    "StatementRow",
    "StatementView",
    "SummaryStatement",
    "statement_view",
    "summary_statement",
]
