"""The store's tables (SQLModel): what exists now, and where the rest of the cycle goes.

Now:

* ``store_meta``: key/value facts about the store itself (created when, by whom, with which
  tenantcost; last upgraded). The schema revision itself is Alembic's ``alembic_version``.
* ``rule_file``: every distinct rule file loaded, verbatim (provenance: what a person wrote).
* ``rule_version``: one row per rule version id, append-only: its effective date and its
  canonical content (a rule document of that one version, with the currency and
  ``hours_per_month`` it is read with) and that content's sha256. A version id never changes
  meaning once stored.
* ``batch``: the catalog of ingested raw data. A Parquet partition file is live only when a
  committed batch names it (by ``uid``, which exists before the commit so files can be
  written first and committed by inserting this row).
* ``batch_cell``: the (window, service) or (window, workload) cells of each batch (what a
  ``replace`` batch supersedes), and ``batch_file``: its Parquet files, by day.
* ``batch_withdrawal`` (0011): a batch withdrawn from its open months (who, when, why); the
  batch's status is then ``withdrawn`` and it no longer counts, its rows and files stay.
* ``usage_compaction`` (0016): a day's committed usage batches folded into one Parquet file
  that readers open instead of the batches' own (meter traffic: thousands of batches a day).
* ``billing_cell`` (0013): the (billing period, billing account) cells of a ``billing`` batch
  with what ``status`` and ``close`` read of them (rows, invoices, hours covered).
* ``otlp_series`` (0015): the last point of each OTLP series ``POST /v1/metrics`` reads.
* ``month_bridge`` (0017), ``month_bridge_client``, ``month_bridge_part``: each run's bridge
  against the previous month's issued run, cached per pair of runs.
* ``sheet_render`` (0018): an issued revision's rendered sheets (HTML, Markdown, PDF, the
  confidence block), per renderer version; ``sheet_render_job``: the claim of the one
  background rendering of a revision (:mod:`tenantcost.store.sheet_cache`).
* ``budget_version`` (0022), ``budget_client``: each month's budget versions (``budget
  load``) and their clients' bands (:mod:`tenantcost.store.budgets`).

* ``run`` (0004): one ``tenantcost run`` (uuid id, month, rules, code version, timings,
  actor, totals), ``run_input`` (the batches it read, with their sha256), ``run_client``
  (per-client totals), ``run_line`` (lines per client, source, kind and key over the period)
  and ``run_figure`` (unattributed, residual, exclusions and the cascade, one row each).
  Per-period results only: per-window usage stays in Parquet.

* ``month_event`` (0005): every ``close`` and ``reopen`` of a month, append-only (action,
  revision, reason, actor, time; a close names the run it issued). A month's state is its
  latest event's: closed after a close, open before any and after a reopen.
* ``statement`` (0005): the issued statements, one row per client × month × revision, written
  once by a close and never updated (amount, the previous revision's amount and the
  difference, reason, incomplete flag, run, rule ids, who and when).

Next (their own migrations): per-window pool figures and ``token`` (the service).

Every timestamp is stored in UTC (:class:`UTCDateTime`): SQLite has no time zone type, and a
store read on a machine in another zone must give the same instants.
"""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    DateTime,
    Dialect,
    Double,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    Table,
    Text,
    TypeDecorator,
    UniqueConstraint,
)
from sqlalchemy.orm import registry
from sqlmodel import Field, SQLModel

NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}
"""Constraint names are fixed by convention, the same on SQLite and PostgreSQL, so a later
migration can drop or alter them by name (SQLite's batch mode needs the names)."""

BATCH_KINDS = ("costs", "usage", "billing")
BATCH_MODES = ("replace", "sum")
BATCH_STATUSES = ("pending", "committed", "aborted", "withdrawn")


class UTCDateTime(TypeDecorator[datetime]):
    """An aware UTC datetime in, an aware UTC datetime out, on every backend.

    PostgreSQL keeps ``timestamptz``; SQLite keeps the UTC wall time as text. A naive value
    is refused on the way in: it would be ambiguous."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError(f"naive datetime {value!r}: the store keeps aware UTC times")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def utcnow() -> datetime:
    """Now, aware, in UTC (microseconds kept: PostgreSQL and SQLite both hold them)."""
    return datetime.now(UTC)


class StoreModel(
    SQLModel, registry=registry(metadata=MetaData(naming_convention=NAMING_CONVENTION))
):
    """Base of the store's tables: their own metadata (not SQLModel's global one), with the
    naming convention, so Alembic compares exactly these tables."""


def _table_args(*checks: tuple[str, str] | Index | UniqueConstraint) -> tuple[Any, ...]:
    return tuple(c if not isinstance(c, tuple) else CheckConstraint(c[1], name=c[0])
                 for c in checks)  # fmt: skip


def _in(column: str, values: tuple[str, ...]) -> str:
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


class StoreMeta(StoreModel, table=True):
    """A fact about the store itself (``created_at``, ``created_with``, ``upgraded_at``...)."""

    __tablename__ = "store_meta"

    key: str = Field(primary_key=True, max_length=64)
    value: str = Field(sa_type=Text)
    updated_at: datetime = Field(sa_type=UTCDateTime, default_factory=utcnow)


class RuleFile(StoreModel, table=True):
    """A rule file as loaded, byte for byte (its sha256 is over the raw bytes)."""

    __tablename__ = "rule_file"

    id: int | None = Field(default=None, primary_key=True)
    sha256: str = Field(max_length=64, unique=True)
    origin: str = Field(sa_type=Text)
    content: str = Field(sa_type=Text)
    currency: str = Field(max_length=3)
    loaded_at: datetime = Field(sa_type=UTCDateTime, default_factory=utcnow)
    actor: str = Field(max_length=200)


class RuleVersion(StoreModel, table=True):
    """One rule version, append-only: ``rule_id`` is the version's ``id`` in the rule file
    (history's ``rule_ids``), ``content`` its canonical rule document (JSON), ``sha256`` the
    content's. ``rule_file_id`` is the file that first brought it."""

    __tablename__ = "rule_version"

    id: int | None = Field(default=None, primary_key=True)
    rule_id: str = Field(max_length=200, unique=True)
    effective_from: datetime = Field(sa_type=UTCDateTime, unique=True)
    content: str = Field(sa_type=Text)
    sha256: str = Field(max_length=64)
    rule_file_id: int = Field(foreign_key="rule_file.id", index=True)
    loaded_at: datetime = Field(sa_type=UTCDateTime, default_factory=utcnow)
    actor: str = Field(max_length=200)


class Batch(StoreModel, table=True):
    """One ingested batch of costs or usage: the unit of atomicity and of provenance.

    ``id`` orders batches by commit (a later ``replace`` wins); ``uid`` names the batch's
    Parquet files before the row exists. ``window_from``/``window_to`` bound the windows the
    batch covers (``to`` exclusive); ``rows`` counts the canonical rows stored; ``sha256`` is
    over its files' sha256 in day order (``"<day> <sha256>"`` lines; usage rows are written in
    canonical order), so the same input gives the same sha256. Only committed batches are
    written (the row is the commit point); ``pending`` and ``aborted`` are reserved.
    ``withdrawn`` (0011) is a committed batch taken back by ``batch withdraw``: every reader
    asks for ``committed`` batches, so it no longer counts anywhere, while its row, cells and
    files stay for provenance (:class:`BatchWithdrawal` says who, when and why)."""

    __tablename__ = "batch"
    __table_args__ = _table_args(
        ("kind", _in("kind", BATCH_KINDS)),
        ("mode", _in("mode", BATCH_MODES)),
        ("status", _in("status", BATCH_STATUSES)),
        ("rows", "rows >= 0"),
        ("window", "window_to > window_from"),
        Index("ix_batch_kind_window_from", "kind", "window_from"),
    )

    id: int | None = Field(default=None, primary_key=True)
    uid: str = Field(max_length=32, unique=True)
    kind: str = Field(max_length=16)
    source: str = Field(sa_type=Text)
    mode: str = Field(max_length=16, default="replace")
    rows: int = Field(sa_type=BigInteger)
    sha256: str = Field(max_length=64)
    window_from: datetime = Field(sa_type=UTCDateTime)
    window_to: datetime = Field(sa_type=UTCDateTime)
    created_at: datetime = Field(sa_type=UTCDateTime, default_factory=utcnow)
    actor: str = Field(max_length=200)
    status: str = Field(max_length=16, default="pending")


class BatchCell(StoreModel, table=True):
    """One (window, key) cell a batch holds rows for: ``key`` is the service (usage) or the
    workload (costs, :func:`tenantcost.store.ingest.workload_key`). A ``replace`` batch
    supersedes every earlier batch's rows of its cells: the rows of a cell that count are
    those of the cell's latest ``replace`` batch and of the ``sum`` batches after it."""

    __tablename__ = "batch_cell"
    __table_args__ = _table_args(Index("ix_batch_cell_window_start_key", "window_start", "key"))

    id: int | None = Field(default=None, primary_key=True)
    batch_id: int = Field(foreign_key="batch.id", index=True)
    window_start: datetime = Field(sa_type=UTCDateTime)
    window_end: datetime = Field(sa_type=UTCDateTime)
    key: str = Field(sa_type=Text)


class BatchFile(StoreModel, table=True):
    """One Parquet file of a batch (``path`` relative to the data directory, under
    ``<kind>/date=<day>/``): readers open only the files committed batches name."""

    __tablename__ = "batch_file"
    __table_args__ = _table_args(
        ("rows", "rows >= 0"),
        Index("ix_batch_file_day_batch_id", "day", "batch_id"),
    )

    id: int | None = Field(default=None, primary_key=True)
    batch_id: int = Field(foreign_key="batch.id", index=True)
    day: str = Field(max_length=10, index=True)
    path: str = Field(sa_type=Text)
    rows: int = Field(sa_type=BigInteger)
    sha256: str = Field(max_length=64)


class BatchWithdrawal(StoreModel, table=True):
    """A batch withdrawn by ``batch withdraw`` (0011), once: by whom, when and why. The
    withdrawal is the repair for records a later ingest made unusable (a usage window that a
    cost window ingested afterwards cuts): the month reads as if the batch had never been
    ingested, and what counted before it (the cells a ``replace`` batch had replaced) counts
    again."""

    __tablename__ = "batch_withdrawal"

    id: int | None = Field(default=None, primary_key=True)
    batch_id: int = Field(foreign_key="batch.id", unique=True)
    reason: str = Field(sa_type=Text)
    actor: str = Field(max_length=200)
    at: datetime = Field(sa_type=UTCDateTime, default_factory=utcnow)


COMPACTION_STATUSES = ("active", "superseded", "invalid")


class UsageCompaction(StoreModel, table=True):
    """One day's committed usage batches folded into one Parquet file (0016): the day's live
    rows (the which-rows-count rule applied, ``sum`` rows added up per window, service and
    client), read as one virtual batch whose id is ``upto_batch_id``, the largest batch id it
    folds (:mod:`tenantcost.store.compaction`). It folds every committed usage batch with a
    file on ``day`` and an id up to ``upto_batch_id`` (ids are given at commit under the
    write lock, so none can join later): no per-file link is needed. ``active`` is the one
    readers use (at most one per day); a newer compaction of the day makes it ``superseded``,
    the withdrawal of a batch it folds ``invalid`` (``ended_at``). The batches' own rows,
    cells and files stay: provenance never reads this table."""

    __tablename__ = "usage_compaction"
    __table_args__ = _table_args(
        ("status", _in("status", COMPACTION_STATUSES)),
        ("rows", "rows >= 0"),
        Index("ix_usage_compaction_day_status", "day", "status"),
    )

    id: int | None = Field(default=None, primary_key=True)
    uid: str = Field(max_length=32, unique=True)
    day: str = Field(max_length=10)
    path: str = Field(sa_type=Text)
    rows: int = Field(sa_type=BigInteger)
    sha256: str = Field(max_length=64)
    upto_batch_id: int = Field(foreign_key="batch.id")
    batches: int = Field()
    """How many committed batches it folds (previous compaction's included)."""
    status: str = Field(max_length=16, default="active")
    created_at: datetime = Field(sa_type=UTCDateTime, default_factory=utcnow)
    ended_at: datetime | None = Field(default=None, sa_type=UTCDateTime)


class SheetRender(StoreModel, table=True):
    """A client's sheet of an issued revision as rendered (0018): an issued revision never
    changes, so its sheets are rendered once and served from here by every worker.
    ``version`` is the renderer's (code and templates): a new one renders again."""

    __tablename__ = "sheet_render"

    run_id: str = Field(foreign_key="run.id", primary_key=True, max_length=36)
    revision: int = Field(primary_key=True)
    client: str = Field(primary_key=True, sa_type=Text)
    format: str = Field(primary_key=True, max_length=16)
    version: str = Field(primary_key=True, max_length=64)
    body: bytes = Field(sa_type=LargeBinary)
    rendered_at: datetime = Field(sa_type=UTCDateTime, default_factory=utcnow)


class SheetRenderJob(StoreModel, table=True):
    """The background rendering of one issued revision's sheets at one renderer version
    (0018): the primary key is the claim, so one process in all renders it, once;
    ``heartbeat_at`` lets another take over a claim whose process died."""

    __tablename__ = "sheet_render_job"

    run_id: str = Field(foreign_key="run.id", primary_key=True, max_length=36)
    revision: int = Field(primary_key=True)
    version: str = Field(primary_key=True, max_length=64)
    month: str = Field(max_length=7)
    claimed_by: str = Field(sa_type=Text)
    claimed_at: datetime = Field(sa_type=UTCDateTime)
    heartbeat_at: datetime = Field(sa_type=UTCDateTime)
    finished_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    sheets: int = Field(default=0)
    """Sheets (client x format) this job rendered (those already cached are not counted)."""
    error: str | None = Field(default=None, sa_type=Text)


class BillingCell(StoreModel, table=True):
    """One (billing period, billing account) cell of a ``billing`` batch (0013), also in
    ``batch_cell`` (``window_start``/``window_end`` = the billing period, ``key`` = the
    account): the latest committed billing batch holding a cell is the only one whose rows of
    it count (an export restated replaces, never adds). What ``status`` and ``close`` need of
    the cell without opening its Parquet file: ``rows``, ``invoices`` (JSON list of the
    InvoiceIds), ``charge_end`` (the latest ChargePeriodEnd) and ``coverage`` (JSON list of
    ``[start, end]`` spans, RFC 3339 UTC, merged: the hours the cell's usage lines cover)."""

    __tablename__ = "billing_cell"

    id: int | None = Field(default=None, primary_key=True)
    batch_id: int = Field(foreign_key="batch.id", index=True)
    billing_period_start: datetime = Field(sa_type=UTCDateTime)
    billing_period_end: datetime = Field(sa_type=UTCDateTime)
    billing_account_id: str = Field(sa_type=Text)
    rows: int = Field(sa_type=BigInteger)
    invoices: str = Field(sa_type=Text)
    charge_end: datetime = Field(sa_type=UTCDateTime)
    coverage: str = Field(sa_type=Text)


RUN_STATUSES = ("succeeded",)
"""A run row is written once, when its results are complete (a failed run records nothing)."""


class Run(StoreModel, table=True):
    """One ``tenantcost run``: what it read, under which rules, by whom, and its totals.

    ``id`` is a uuid (a string in JSON and history); ``rule_ids`` the JSON list of the rule
    versions in force in the period and ``rule_file_sha256`` the sha256 of the stored rule
    file whose settings it used; the batches it read are in ``run_input``."""

    __tablename__ = "run"
    __table_args__ = _table_args(
        ("status", _in("status", RUN_STATUSES)),
        Index("ix_run_month_started_at", "month", "started_at"),
    )

    id: str = Field(primary_key=True, max_length=36)
    month: str = Field(max_length=7)
    period_start: datetime = Field(sa_type=UTCDateTime)
    period_end: datetime = Field(sa_type=UTCDateTime)
    status: str = Field(max_length=16)
    key_override: str | None = Field(default=None, sa_type=Text)
    rule_ids: str = Field(sa_type=Text)
    rule_file_sha256: str = Field(max_length=64)
    code_version: str = Field(max_length=64)
    currency: str = Field(max_length=3)
    reference_total: int = Field(sa_type=BigInteger)
    clients_total: int = Field(sa_type=BigInteger)
    unattributed: int = Field(sa_type=BigInteger)
    gap: int = Field(sa_type=BigInteger)
    started_at: datetime = Field(sa_type=UTCDateTime)
    finished_at: datetime = Field(sa_type=UTCDateTime)
    actor: str = Field(max_length=200)
    invoice: str | None = Field(default=None, sa_type=Text)
    """The invoice cascade of a run on stored billing data (0013): the ``invoice`` object of
    ``allocate --format json`` as JSON; NULL for a run without billing data."""


class RunInput(StoreModel, table=True):
    """A batch a run read, with its sha256 at the time (the run's input fingerprint)."""

    __tablename__ = "run_input"

    run_id: str = Field(foreign_key="run.id", primary_key=True, max_length=36)
    batch_id: int = Field(foreign_key="batch.id", primary_key=True)
    kind: str = Field(max_length=16)
    sha256: str = Field(max_length=64)


class RunClient(StoreModel, table=True):
    """A client's total of a run (micro-units)."""

    __tablename__ = "run_client"

    run_id: str = Field(foreign_key="run.id", primary_key=True, max_length=36)
    client: str = Field(primary_key=True, sa_type=Text)
    amount: int = Field(sa_type=BigInteger)


class RunLine(StoreModel, table=True):
    """A client's line per source, kind and key over the period (never per window)."""

    __tablename__ = "run_line"
    __table_args__ = _table_args(Index("ix_run_line_run_id_client", "run_id", "client"))

    id: int | None = Field(default=None, primary_key=True)
    run_id: str = Field(foreign_key="run.id", index=True, max_length=36)
    client: str = Field(sa_type=Text)
    source: str = Field(sa_type=Text)
    kind: str = Field(max_length=32)
    key: str = Field(sa_type=Text)
    measure: float | None = Field(default=None)
    total_measure: float | None = Field(default=None)
    share: float = Field()
    amount: int = Field(sa_type=BigInteger)
    windows: int = Field(sa_type=BigInteger)
    rule_id: str | None = Field(default=None, max_length=200)
    """The rule version of the line (0007; NULL in runs recorded before): a period spanning
    two versions has a line per version."""


class RunFigure(StoreModel, table=True):
    """The run's other period figures, one row each: ``section`` is ``unattributed``
    (name = source, kind, detail = cause), ``residual`` (name = class; ``amount`` remaining,
    ``before_distribution``, ``distributed``), ``exclusion`` (name, detail = reason) or
    ``cascade`` (name = line, kind, detail; ``position`` keeps the cascade's order)."""

    __tablename__ = "run_figure"
    __table_args__ = _table_args(
        ("section", _in("section", ("unattributed", "residual", "exclusion", "cascade"))),
    )

    id: int | None = Field(default=None, primary_key=True)
    run_id: str = Field(foreign_key="run.id", index=True, max_length=36)
    section: str = Field(max_length=16)
    position: int = Field()
    name: str = Field(sa_type=Text)
    kind: str | None = Field(default=None, max_length=32)
    detail: str | None = Field(default=None, sa_type=Text)
    amount: int = Field(sa_type=BigInteger)
    before_distribution: int | None = Field(default=None, sa_type=BigInteger)
    distributed: int | None = Field(default=None, sa_type=BigInteger)


class RunReport(StoreModel, table=True):
    """What a run's sheets need besides its lines and figures, written by ``run`` (0007): its
    cost and external totals, windows and hours, and the rule set it ran with (JSON, so a later
    rule load does not change how its sheets read)."""

    __tablename__ = "run_report"

    run_id: str = Field(foreign_key="run.id", primary_key=True, max_length=36)
    cost_total: int = Field(sa_type=BigInteger)
    external_total: int = Field(sa_type=BigInteger)
    windows: int = Field(sa_type=BigInteger)
    hours: float = Field()
    rules: str = Field(sa_type=Text)
    rules_origin: str = Field(sa_type=Text)


class RunPack(StoreModel, table=True):
    """The report pack's figures of a run, written by ``close`` for the run it issues (0007;
    re-running every alternative key is too slow for each ``run``): the alternative keys, the
    change notices (titles, texts, column labels; per-client amounts in
    ``run_client_figure``), the usage's no-client shares per (service, key), the hours of cost
    windows no usage row covers per service, and the client ids seen only in the usage or the
    rules (redacted from free text). JSON columns hold small per-run lists."""

    __tablename__ = "run_pack"

    run_id: str = Field(foreign_key="run.id", primary_key=True, max_length=36)
    keys: str = Field(sa_type=Text)
    changes: str = Field(sa_type=Text)
    no_client: str = Field(sa_type=Text)
    uncovered_hours: str = Field(sa_type=Text)
    other_clients: str = Field(sa_type=Text)
    recorded_at: datetime = Field(sa_type=UTCDateTime, default_factory=utcnow)


class RunClientFigure(StoreModel, table=True):
    """A client's amount in one of a run's pack figures (0007, with ``run_pack``):
    ``key:<key>`` its total with every split by that key (``key:rule``: the rule as written),
    ``change:<i>:<j>`` column ``j`` of change notice ``i``."""

    __tablename__ = "run_client_figure"

    run_id: str = Field(foreign_key="run.id", primary_key=True, max_length=36)
    figure: str = Field(primary_key=True, max_length=200)
    client: str = Field(primary_key=True, sa_type=Text)
    amount: int = Field(sa_type=BigInteger)


class RunClientService(StoreModel, table=True):
    """A shared service a client used in the run's period (0007, with ``run_pack``; the
    confidence grades)."""

    __tablename__ = "run_client_service"

    run_id: str = Field(foreign_key="run.id", primary_key=True, max_length=36)
    client: str = Field(primary_key=True, sa_type=Text)
    service: str = Field(primary_key=True, sa_type=Text)


class RunPool(StoreModel, table=True):
    """A pool of a run (0007): the fewest clients one window of the period split it among
    (``AllocationResult.pool_clients``; sheets withhold the figures of small pools)."""

    __tablename__ = "run_pool"

    run_id: str = Field(foreign_key="run.id", primary_key=True, max_length=36)
    rule_id: str = Field(primary_key=True, max_length=200)
    kind: str = Field(primary_key=True, max_length=32)
    source: str = Field(primary_key=True, sa_type=Text)
    key: str = Field(primary_key=True, sa_type=Text)
    min_clients: int = Field(sa_type=BigInteger)


class RunUnattributed(StoreModel, table=True):
    """The unattributed part of a pool in one window, with its cause (0007): a per-window
    pool figure (the hours without usage data of the confidence grades), not usage."""

    __tablename__ = "run_unattributed"

    id: int | None = Field(default=None, primary_key=True)
    run_id: str = Field(foreign_key="run.id", index=True, max_length=36)
    rule_id: str = Field(max_length=200)
    source: str = Field(sa_type=Text)
    kind: str = Field(max_length=32)
    cause: str = Field(sa_type=Text)
    window_start: datetime = Field(sa_type=UTCDateTime)
    window_end: datetime = Field(sa_type=UTCDateTime)
    amount: int = Field(sa_type=BigInteger)


RUN_WORKLOAD_FRAMES = ("residual", "exclusions", "unclassified")


class RunWorkload(StoreModel, table=True):
    """A residual, excluded or unclassified workload's cost over the period, per rule version
    (0007): ``frame`` names the result table, ``class``/``name``/``reason`` its columns."""

    __tablename__ = "run_workload"
    __table_args__ = _table_args(("frame", _in("frame", RUN_WORKLOAD_FRAMES)))

    id: int | None = Field(default=None, primary_key=True)
    run_id: str = Field(foreign_key="run.id", index=True, max_length=36)
    frame: str = Field(max_length=16)
    rule_id: str = Field(max_length=200)
    class_: str = Field(sa_column_kwargs={"name": "class"}, max_length=32)
    name: str = Field(sa_type=Text)
    reason: str = Field(sa_type=Text)
    amount: int = Field(sa_type=BigInteger)


MONTH_ACTIONS = ("close", "reopen")
"""What a ``month_event`` records (:class:`tenantcost.store.month_state.MonthAction`)."""


class MonthEvent(StoreModel, table=True):
    """One close or reopen of a month, append-only: the month's state is its latest event's.

    ``revision`` is the revision a close issued, or the revision a reopen unlocked (the next
    close issues ``revision + 1``); (month, action, revision) is unique, so two closes racing
    for the same revision cannot both commit. ``run_id`` is the run a close issued;
    ``incomplete`` marks a close with ``--allow-incomplete`` on a month with missing hours, and
    ``detail`` says which (a close's note; for a reopen, ``reason`` is required).
    ``client_reason`` (0011) is what clients' readers are told instead of ``reason``, which is
    for finance only (``reopen --client-reason``; NULL: the fixed note); a close carries its
    reopen's, like ``reason``. ``display_rule`` and ``display_places`` (0025) are the display
    rule's version and the decimals a close froze with its revision
    (:mod:`tenantcost.store.display`); NULL on reopens and on closes from before 0025."""

    __tablename__ = "month_event"
    __table_args__ = _table_args(
        ("action", _in("action", MONTH_ACTIONS)),
        ("revision", "revision >= 1"),
        UniqueConstraint("month", "action", "revision"),
        Index("ix_month_event_month_id", "month", "id"),
    )

    id: int | None = Field(default=None, primary_key=True)
    month: str = Field(max_length=7)
    action: str = Field(max_length=16)
    revision: int = Field()
    reason: str | None = Field(default=None, sa_type=Text)
    run_id: str | None = Field(default=None, foreign_key="run.id", max_length=36)
    incomplete: bool = Field(default=False, sa_type=Boolean)
    detail: str | None = Field(default=None, sa_type=Text)
    at: datetime = Field(sa_type=UTCDateTime, default_factory=utcnow)
    actor: str = Field(max_length=200)
    client_reason: str | None = Field(default=None, sa_type=Text)
    display_rule: int | None = Field(default=None)
    display_places: int | None = Field(default=None)


class Statement(StoreModel, table=True):
    """A client's issued statement for a month at one revision: written once, never updated.

    ``amount`` in micro-units (history's and ``allocate --format json``'s minor unit);
    ``previous_amount`` is the client's amount at the previous revision (NULL at revision 1 or
    for a client new in this revision) and ``difference`` = amount − previous (amount when there
    is none). A client of the previous revision that the new run no longer has gets a
    revision with amount 0. ``rule_ids`` is the run's JSON list; ``reason`` the reopen's, and
    ``client_reason`` (0011) its reason for clients (see :class:`MonthEvent`)."""

    __tablename__ = "statement"
    __table_args__ = _table_args(
        ("revision", "revision >= 1"),
        UniqueConstraint("month", "client", "revision"),
        Index("ix_statement_client_month", "client", "month"),
    )

    id: int | None = Field(default=None, primary_key=True)
    month: str = Field(max_length=7)
    client: str = Field(sa_type=Text)
    revision: int = Field()
    amount: int = Field(sa_type=BigInteger)
    previous_amount: int | None = Field(default=None, sa_type=BigInteger)
    difference: int = Field(sa_type=BigInteger)
    currency: str = Field(max_length=3)
    run_id: str = Field(foreign_key="run.id", index=True, max_length=36)
    event_id: int = Field(foreign_key="month_event.id", index=True)
    rule_ids: str = Field(sa_type=Text)
    reason: str | None = Field(default=None, sa_type=Text)
    incomplete: bool = Field(default=False, sa_type=Boolean)
    issued_at: datetime = Field(sa_type=UTCDateTime)
    issued_by: str = Field(max_length=200)
    client_reason: str | None = Field(default=None, sa_type=Text)


TOKEN_ROLES = ("admin", "finance", "account-manager", "ingest", "product")
"""The service's roles (:class:`tenantcost.service.permissions.Role`)."""


class Token(StoreModel, table=True):
    """A service access token (0006). Only the sha256 of the secret is kept: a stolen
    database does not give working tokens. ``name`` is unique for ever (a revoked token keeps
    its row and name, so logs and actors stay unambiguous); ``clients`` is the JSON list of
    an account manager's clients; ``expires_at``/``revoked_at`` end it."""

    __tablename__ = "token"
    __table_args__ = _table_args(("role", _in("role", TOKEN_ROLES)))

    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(max_length=200, unique=True)
    role: str = Field(max_length=32)
    clients: str = Field(sa_type=Text, default="[]")
    hash: str = Field(max_length=64, unique=True)
    created_at: datetime = Field(sa_type=UTCDateTime, default_factory=utcnow)
    created_by: str = Field(max_length=200)
    expires_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    revoked_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    revoked_by: str | None = Field(default=None, max_length=200)


class IdempotencyKey(StoreModel, table=True):
    """The first answer to a ``POST /api/v1/usage`` carrying an ``Idempotency-Key`` (0006),
    written in the batch's own transaction: a retry with the same key and body gets this
    answer and changes nothing; the same key with another body (``request_sha256``) is 409.
    Keys are looked up store-wide (0014 indexes ``key``), whichever token sent them: a batch
    spooled by a meter and delivered after its token was rotated is replayed, not added.
    ``token_name`` records who sent the key first (it stays in the primary key, so rows
    stored per token before 0014, one key under two tokens, remain valid)."""

    __tablename__ = "idempotency_key"

    token_name: str = Field(primary_key=True, max_length=200)
    key: str = Field(primary_key=True, max_length=200, index=True)
    request_sha256: str = Field(max_length=64)
    status_code: int = Field()
    response: str = Field(sa_type=Text)
    batch_uid: str | None = Field(default=None, max_length=32)
    created_at: datetime = Field(sa_type=UTCDateTime, default_factory=utcnow)


class WebSessionEnd(StoreModel, table=True):
    """A browser session ended by logout (0008): its id (``sid``, in the signed cookie), so a
    copy of the cookie is refused afterwards on every worker. Sessions live in the cookie, not
    here; ``expires_at`` is when the cookie would have expired anyway (older rows may go)."""

    __tablename__ = "web_session_end"

    sid: str = Field(primary_key=True, max_length=64)
    token_id: int = Field(foreign_key="token.id")
    ended_at: datetime = Field(sa_type=UTCDateTime, default_factory=utcnow)
    expires_at: datetime = Field(sa_type=UTCDateTime)


class OtlpSeries(StoreModel, table=True):
    """The last point received of each OTLP series feeding a usage column (0015), for
    ``POST /v1/metrics``: a cumulative point's increment is its difference from this one, and
    a point at or before it was received already (exporters retry). ``key`` digests the
    series' identity (resource and scope, metric, point attributes) and the usage column;
    a row not ``seen_at`` for 48 hours is deleted (every restarted process is new series).
    Updated in the transaction of the batch that stores the points' usage."""

    __tablename__ = "otlp_series"

    key: str = Field(primary_key=True, max_length=32)
    start_unix_nano: int = Field(sa_type=BigInteger)
    time_unix_nano: int = Field(sa_type=BigInteger)
    value: float = Field(sa_type=Double)
    seen_at: datetime = Field(sa_type=UTCDateTime, index=True)


class CatalogLoad(StoreModel, table=True):
    """One ``tenantcost catalog load`` (0009): the client catalog file as loaded (its sha256
    over the raw bytes, where it came from, how many clients), by whom and when. The latest
    load is the store's catalog; earlier loads stay for provenance."""

    __tablename__ = "catalog_load"

    id: int | None = Field(default=None, primary_key=True)
    sha256: str = Field(max_length=64)
    origin: str = Field(sa_type=Text)
    currency: str = Field(max_length=3)
    clients: int = Field()
    loaded_at: datetime = Field(sa_type=UTCDateTime, default_factory=utcnow)
    actor: str = Field(max_length=200)


class CatalogClient(StoreModel, table=True):
    """A client of a catalog load (0009), as :func:`tenantcost.catalog.read_catalog` checked
    it: ``monthly_revenue`` in micro-units (``has_revenue`` false: unknown), the contract's
    first and last day (``contract_start``/``contract_end``, inclusive; NULL: open)."""

    __tablename__ = "catalog_client"

    load_id: int = Field(foreign_key="catalog_load.id", primary_key=True)
    client: str = Field(primary_key=True, max_length=400)
    name: str = Field(sa_type=Text, default="")
    plan: str = Field(sa_type=Text, default="")
    segment: str = Field(sa_type=Text, default="")
    account_manager: str = Field(sa_type=Text, default="")
    monthly_revenue: int = Field(sa_type=BigInteger)
    has_revenue: bool = Field(sa_type=Boolean)
    currency: str = Field(max_length=3)
    contract_start: date | None = Field(default=None)
    contract_end: date | None = Field(default=None)


BRIDGE_EFFECTS = ("volume", "rate", "rule", "residual", "direct", "new_source", "ended_source")
"""The parts of a bridge (:class:`tenantcost.bridge.Effect`)."""


class MonthBridge(StoreModel, table=True):
    """The month-over-month bridge of one run against the previous month's run issued when
    it was computed (0017): a cache, keyed by the two runs, so a restated previous month
    (another run issued) gets a bridge of its own and the old one is never read again
    (:mod:`tenantcost.store.month_bridge`). ``restated``: a rule change between the runs was
    restated from the store's inputs (false when there was none to restate, or it could not
    be: the parts then add up all the same). Per-client amounts in ``month_bridge_client``,
    parts in ``month_bridge_part``."""

    __tablename__ = "month_bridge"
    __table_args__ = _table_args(UniqueConstraint("run_id", "previous_run_id"))

    id: int | None = Field(default=None, primary_key=True)
    month: str = Field(max_length=7)
    run_id: str = Field(foreign_key="run.id", max_length=36)
    previous_month: str = Field(max_length=7)
    previous_run_id: str = Field(foreign_key="run.id", max_length=36)
    restated: bool = Field(sa_type=Boolean)
    computed_at: datetime = Field(sa_type=UTCDateTime, default_factory=utcnow)


class MonthBridgeClient(StoreModel, table=True):
    """A client's amounts in the two runs of a bridge (micro-units; clients of both only)."""

    __tablename__ = "month_bridge_client"

    bridge_id: int = Field(foreign_key="month_bridge.id", primary_key=True)
    client: str = Field(primary_key=True, sa_type=Text)
    previous_amount: int = Field(sa_type=BigInteger)
    amount: int = Field(sa_type=BigInteger)


class MonthBridgePart(StoreModel, table=True):
    """One part of a client's bridge (``explain``'s): effect, source, key, amount
    (micro-units; a client's parts add up to its change exactly) and the plain reason;
    ``position`` keeps the canonical order."""

    __tablename__ = "month_bridge_part"
    __table_args__ = _table_args(
        ("effect", _in("effect", BRIDGE_EFFECTS)),
        Index("ix_month_bridge_part_bridge_id_client", "bridge_id", "client"),
    )

    bridge_id: int = Field(foreign_key="month_bridge.id", primary_key=True)
    position: int = Field(primary_key=True, sa_type=BigInteger)
    client: str = Field(sa_type=Text)
    effect: str = Field(max_length=16)
    source: str = Field(sa_type=Text)
    key: str = Field(sa_type=Text)
    amount: int = Field(sa_type=BigInteger)
    reason: str = Field(sa_type=Text)


WATCH_STATUSES = ("below", "within", "above", "no_budget")
"""A client's projection against its budget band (:class:`tenantcost.watch.BudgetStatus`)."""


class WatchSnapshot(StoreModel, table=True):
    """One ``tenantcost watch`` run on a month (0021): when it looked (``as_of``), whether the
    month was closed then, and the month-level part of its answer (``document``: the JSON
    contract without the per-client lists; :mod:`tenantcost.store.watch_snapshots`)."""

    __tablename__ = "watch_snapshot"
    __table_args__ = _table_args(Index("ix_watch_snapshot_month_id", "month", "id"))

    id: int | None = Field(default=None, primary_key=True)
    month: str = Field(max_length=7)
    as_of: datetime = Field(sa_type=UTCDateTime)
    computed_at: datetime = Field(sa_type=UTCDateTime, default_factory=utcnow)
    actor: str = Field(sa_type=Text)
    month_closed: bool = Field(sa_type=Boolean)
    currency: str = Field(max_length=3)
    document: str = Field(sa_type=Text)


class WatchEntry(StoreModel, table=True):
    """One client's part of a watch run: the columns a list sorts and filters on, and
    ``entry``, the client's object of the JSON contract with its own ``anomalies``,
    ``rule_changes`` and ``warnings`` (JSON), so a reader of one client reads one row."""

    __tablename__ = "watch_entry"
    __table_args__ = _table_args(("status", _in("status", WATCH_STATUSES)))

    snapshot_id: int = Field(foreign_key="watch_snapshot.id", primary_key=True)
    client: str = Field(primary_key=True, sa_type=Text)
    status: str = Field(max_length=16)
    month_to_date: int = Field(sa_type=BigInteger)
    projected: int = Field(sa_type=BigInteger)
    anomalies: int = Field(sa_type=Integer)
    entry: str = Field(sa_type=Text)


class WatchDaily(StoreModel, table=True):
    """A watch run's daily cost per source (0026): for one client (``client``) or, with
    ``client`` empty, summed over every client of the run; ``figures`` is JSON
    (:mod:`tenantcost.store.watch_daily`), one row per client so a page reads one row."""

    __tablename__ = "watch_daily"

    snapshot_id: int = Field(foreign_key="watch_snapshot.id", primary_key=True)
    client: str = Field(primary_key=True, sa_type=Text)
    figures: str = Field(sa_type=Text)


ALERT_CHANNELS = ("webhook", "email")
ALERT_KINDS = ("anomaly", "status")
DELIVERY_STATUSES = ("sending", "sent", "failed")
"""``sending``: a ``watch --notify`` run holds the delivery; ``sent`` is final; ``failed`` is
tried again by the next run (:mod:`tenantcost.store.alert_deliveries`)."""


class AlertDelivery(StoreModel, table=True):
    """One alert to one destination over one channel (0023): whether it was sent, how many
    attempts it took or has failed, the last error and when, so that ``watch --notify``
    delivers each alert once and retries a failed delivery at its next run; who holds a
    ``sending`` claim and since when (0024), so a crashed run's claims are taken over."""

    __tablename__ = "alert_delivery"
    __table_args__ = _table_args(
        ("channel", _in("channel", ALERT_CHANNELS)),
        ("kind", _in("kind", ALERT_KINDS)),
        ("status", _in("status", DELIVERY_STATUSES)),
        Index("ix_alert_delivery_month", "month"),
    )

    alert_key: str = Field(primary_key=True, max_length=64)
    destination: str = Field(primary_key=True, sa_type=Text)
    channel: str = Field(primary_key=True, max_length=8)
    month: str = Field(max_length=7)
    client: str = Field(sa_type=Text)
    kind: str = Field(max_length=16)
    status: str = Field(max_length=16)
    attempts: int = Field(sa_type=Integer)
    last_error: str | None = Field(default=None, sa_type=Text)
    first_attempt_at: datetime = Field(sa_type=UTCDateTime)
    last_attempt_at: datetime = Field(sa_type=UTCDateTime)
    sent_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    claimed_by: str | None = Field(default=None, sa_type=Text)
    """Who holds (or last held) the claim (0024): host, PID namespace, process id and a token
    of the run (:class:`tenantcost.store.alert_deliveries.Claimant`)."""
    claimed_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    """When the claim was taken or last renewed (0024): a ``sending`` claim older than the
    bound may be taken over."""


class BudgetVersion(StoreModel, table=True):
    """One ``tenantcost budget load`` for a month (0022): version ``version`` of the month's
    budget (1, 2, ... per month; the latest is in force, earlier ones stay), the sha256 of its
    canonical rows, where it came from, who loaded it and when. A closed month's budget never
    gets a new version (:mod:`tenantcost.store.budgets`)."""

    __tablename__ = "budget_version"
    __table_args__ = _table_args(("version", "version >= 1"), UniqueConstraint("month", "version"))

    id: int | None = Field(default=None, primary_key=True)
    month: str = Field(max_length=7)
    version: int = Field()
    sha256: str = Field(max_length=64)
    origin: str = Field(sa_type=Text)
    currency: str = Field(max_length=3)
    clients: int = Field()
    loaded_at: datetime = Field(sa_type=UTCDateTime, default_factory=utcnow)
    actor: str = Field(max_length=200)


class BudgetClient(StoreModel, table=True):
    """A client's band in a budget version (0022), in micro-units: ``0 <= low <= expected <=
    high``."""

    __tablename__ = "budget_client"
    __table_args__ = _table_args(
        ("band", "low >= 0 AND low <= expected AND expected <= high"),
    )

    version_id: int = Field(foreign_key="budget_version.id", primary_key=True)
    client: str = Field(primary_key=True, max_length=400)
    low: int = Field(sa_type=BigInteger)
    expected: int = Field(sa_type=BigInteger)
    high: int = Field(sa_type=BigInteger)
    currency: str | None = Field(default=None, max_length=3)
    """The band's currency, a client's own (0029); NULL: the version's (the ledger's)."""


def table(model: type[StoreModel]) -> Table:
    """A model's Core table, for bulk inserts and set queries (SQLModel does not declare
    ``__table__`` to type checkers)."""
    return METADATA.tables[str(model.__tablename__)]


METADATA = StoreModel.metadata
"""The metadata Alembic compares the migrations against (tests/test_store_schema.py)."""


class FxLoad(StoreModel, table=True):
    """One ``tenantcost fx load`` (0027): a rates file, or the bundled ECB history, as loaded
    (sha256 over the stored rows, where it came from, how many rates and which days), by
    whom and when. Later loads win for the same (date, base, quote); every load stays for
    provenance."""

    __tablename__ = "fx_load"

    id: int | None = Field(default=None, primary_key=True)
    sha256: str = Field(max_length=64)
    origin: str = Field(sa_type=Text)
    rates: int = Field()
    first_date: date = Field()
    last_date: date = Field()
    loaded_at: datetime = Field(sa_type=UTCDateTime, default_factory=utcnow)
    actor: str = Field(max_length=200)


class FxRate(StoreModel, table=True):
    """A published rate of an fx load (0027): ``1 base = rate quote`` on ``published_on``, the rate
    as the decimal text that was published (never a float), and its source."""

    __tablename__ = "fx_rate"

    load_id: int = Field(foreign_key="fx_load.id", primary_key=True)
    published_on: date = Field(primary_key=True)
    base: str = Field(primary_key=True, max_length=3)
    quote: str = Field(primary_key=True, max_length=3)
    rate: str = Field(max_length=40)
    source: str = Field(sa_type=Text)


class RunFx(StoreModel, table=True):
    """One conversion of a run into another currency (0028): the ``fx`` document (policy,
    source, every rate used as exact decimal text), the converted cascade (JSON lines
    ``[label, kind, detail, amount]``) and reference total beside the ledger's, and the newest
    ``fx_load`` the run could read (a later load makes the run stale for ``close``)."""

    __tablename__ = "run_fx"

    run_id: str = Field(foreign_key="run.id", primary_key=True, max_length=36)
    currency: str = Field(primary_key=True, max_length=3)
    policy: str = Field(max_length=32)
    source: str = Field(sa_type=Text)
    provisional: bool = Field(sa_type=Boolean)
    document: str = Field(sa_type=Text)
    cascade: str = Field(sa_type=Text)
    reference_total: int = Field(sa_type=BigInteger)
    ledger_reference_total: int = Field(sa_type=BigInteger)
    fx_load_id: int | None = Field(default=None)


class RunFxClient(StoreModel, table=True):
    """A client's total of a run converted into ``currency`` (0028), beside its ledger
    total (micro-units of each)."""

    __tablename__ = "run_fx_client"

    run_id: str = Field(foreign_key="run.id", primary_key=True, max_length=36)
    currency: str = Field(primary_key=True, max_length=3)
    client: str = Field(primary_key=True, sa_type=Text)
    amount: int = Field(sa_type=BigInteger)
    ledger_amount: int = Field(sa_type=BigInteger)


class RunFxWorkload(StoreModel, table=True):
    """A residual, excluded or unclassified workload's cost converted into ``currency``
    (0032), as :class:`RunWorkload` keeps it in the ledger, beside its ledger amount."""

    __tablename__ = "run_fx_workload"
    __table_args__ = _table_args(Index("ix_run_fx_workload_run_currency", "run_id", "currency"))

    id: int | None = Field(default=None, primary_key=True)
    run_id: str = Field(foreign_key="run.id", max_length=36)
    currency: str = Field(max_length=3)
    frame: str = Field(max_length=16)
    rule_id: str = Field(max_length=200)
    class_: str = Field(sa_column_kwargs={"name": "class"}, max_length=32)
    name: str = Field(sa_type=Text)
    reason: str = Field(sa_type=Text)
    amount: int = Field(sa_type=BigInteger)
    ledger_amount: int = Field(sa_type=BigInteger)


class RunFxUnattributed(StoreModel, table=True):
    """The unattributed part of a pool in one window converted into ``currency`` (0032), as
    :class:`RunUnattributed` keeps it in the ledger, beside its ledger amount."""

    __tablename__ = "run_fx_unattributed"
    __table_args__ = _table_args(Index("ix_run_fx_unattributed_run_currency", "run_id", "currency"))

    id: int | None = Field(default=None, primary_key=True)
    run_id: str = Field(foreign_key="run.id", max_length=36)
    currency: str = Field(max_length=3)
    rule_id: str = Field(max_length=200)
    source: str = Field(sa_type=Text)
    kind: str = Field(max_length=32)
    cause: str = Field(sa_type=Text)
    window_start: datetime = Field(sa_type=UTCDateTime)
    window_end: datetime = Field(sa_type=UTCDateTime)
    amount: int = Field(sa_type=BigInteger)
    ledger_amount: int = Field(sa_type=BigInteger)


class RunFxDay(StoreModel, table=True):
    """A client's ledger amount on each UTC day of a run converted under the daily policy
    (0032): a converted sheet lists it beside the day's rate, so its reader can redo the
    conversion."""

    __tablename__ = "run_fx_day"

    run_id: str = Field(foreign_key="run.id", primary_key=True, max_length=36)
    client: str = Field(primary_key=True, sa_type=Text)
    days: str = Field(sa_type=Text)
    """JSON ``{"YYYY-MM-DD": micro-units}``: one row per client, not per client and day."""


class RunFxLine(StoreModel, table=True):
    """A run's line converted into ``currency`` (0030), beside its ledger amount: the lines
    of a client add up to its :class:`RunFxClient` amount."""

    __tablename__ = "run_fx_line"
    __table_args__ = _table_args(
        Index("ix_run_fx_line_run_currency_client", "run_id", "currency", "client")
    )

    id: int | None = Field(default=None, primary_key=True)
    run_id: str = Field(foreign_key="run.id", max_length=36)
    currency: str = Field(max_length=3)
    client: str = Field(sa_type=Text)
    rule_id: str = Field(max_length=200)
    source: str = Field(sa_type=Text)
    kind: str = Field(max_length=32)
    key: str = Field(sa_type=Text)
    amount: int = Field(sa_type=BigInteger)
    ledger_amount: int = Field(sa_type=BigInteger)


class UsageMetric(StoreModel, table=True):
    """A usage column's kind, from the ``metrics:`` of the rule files loaded (0033): a gauge's
    samples are integrated by its ``stale_after`` (:mod:`tenantcost.gauges`). The kind of a
    name never changes (``rules load`` refuses it); its unit and ``stale_after`` follow the
    latest rule file that declares it."""

    __tablename__ = "usage_metric"
    __table_args__ = _table_args(("kind", _in("kind", ("counter", "gauge"))))

    name: str = Field(primary_key=True, max_length=63)
    kind: str = Field(max_length=16)
    unit: str | None = Field(default=None, max_length=32)
    stale_after: str | None = Field(default=None, max_length=8)
    rule_file_id: int = Field(foreign_key="rule_file.id")
    declared_at: datetime = Field(sa_type=UTCDateTime, default_factory=utcnow)


class UsageSample(StoreModel, table=True):
    """A gauge sample of a ``usage`` batch (0033): the level of ``metric`` for a service and
    client at ``t_us`` (microseconds since the epoch, UTC), as the exact decimal text given.
    A sample batch has no files and no cells: the same instant re-sent by a later batch
    replaces its level when read (the larger batch id wins), and a withdrawn batch's samples
    no longer count. One row per sample: a level sampled hourly for 10,000 clients is
    7.3 million rows a month, read by ``(metric, t_us)``."""

    __tablename__ = "usage_sample"
    __table_args__ = (Index("ix_usage_sample_metric_t_us", "metric", "t_us"),)

    id: int | None = Field(default=None, primary_key=True)
    batch_id: int = Field(foreign_key="batch.id", index=True)
    metric: str = Field(max_length=63)
    service: str = Field(sa_type=Text)
    client: str = Field(sa_type=Text)
    t_us: int = Field(sa_type=BigInteger)
    value: str = Field(max_length=40)
