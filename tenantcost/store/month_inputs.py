"""What a month's run reads from the store: its rules and its batches.

A run of a month (``run``, ``close``, ``watch``, the service's comparisons) takes the store's
rules (every stored rule version, with the latest stored rule file's other settings) and the
month's committed batches; ``close`` and the sheets compare the batches a run recorded with
:func:`month_inputs` now, to know whether its figures are still the inputs' (a run is reused,
a pack recorded, a restatement computed only then). The run itself
(:mod:`tenantcost.store.runs`) and the figures it records
(:mod:`tenantcost.store.report_figures`) both read these, so they live apart from either.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd
import yaml
from sqlalchemy import Connection, Engine, Row, Select, func, select

from tenantcost.config.rules import RuleSet, parse_rules
from tenantcost.errors import InputError
from tenantcost.store.models import Batch, BatchFile, RuleFile, RuleVersion, table
from tenantcost.store.rules import sha256_hex, version_document
from tenantcost.windows import Period


@dataclass(frozen=True)
class StoredRules:
    """The store's rules: the rule set a run uses and the rule file it took settings from."""

    ruleset: RuleSet
    file_sha256: str
    origin: str
    document: dict[str, Any]
    """The rule document parsed (recorded with the run: its sheets read with these rules)."""


def latest_rule_document(bind: Engine | Connection) -> dict[str, Any]:
    """The latest stored rule file as written (YAML parsed, not checked); ``{}`` when the
    store holds none. For a top-level setting that needs no parsed rule set
    (``billing:``, ``presentation:``)."""
    from tenantcost.store.connection import connected

    f = table(RuleFile).c
    with connected(bind) as connection:
        content = connection.execute(select(f.content).order_by(f.id.desc()).limit(1)).scalar()
    document = yaml.safe_load(content) if content else None
    return document if isinstance(document, dict) else {}


def presentation_of(bind: Engine | Connection) -> str | None:
    """The latest stored rule file's ``presentation:`` currency (None: none, or no rules)."""
    value = latest_rule_document(bind).get("presentation")
    return str(value).strip().upper() if value else None


def stored_rules(engine: Engine) -> StoredRules:
    """Every stored rule version, with the latest stored rule file's other settings."""
    v = table(RuleVersion).c
    with engine.connect() as connection:
        latest = connection.execute(
            select(table(RuleFile)).order_by(table(RuleFile).c.id.desc()).limit(1)
        ).first()
        versions = connection.execute(
            select(v.rule_id, v.content, v.sha256, v.rule_file_id).order_by(v.effective_from)
        ).all()
        files = dict(connection.execute(
            select(table(RuleFile).c.id, table(RuleFile).c.content).where(
                table(RuleFile).c.id.in_({row.rule_file_id for row in versions}))
        ).all())  # fmt: skip
    if latest is None:
        raise InputError("the store holds no rules: run `tenantcost rules load RULES.yaml` first")
    origin = f"stored rule file {latest.sha256[:12]} ({latest.origin})"
    document = yaml.safe_load(latest.content)
    document["rules"] = _as_written(versions, files)
    return StoredRules(parse_rules(document, origin=origin), latest.sha256, origin, document)


def _as_written(
    versions: Sequence[Row[Any, Any, Any, Any]], files: dict[int, str]
) -> list[dict[str, Any]]:
    """Each stored version as the file that brought it wrote it: the stored content is sorted
    JSON, which would reorder a match's properties in the sheets' rule text ("namespace saas,
    controller api"). The file's version is taken only if its canonical content is the
    stored one (same sha256); otherwise the stored content."""
    written: dict[tuple[int, str], Any] = {}
    for file_id, content in files.items():  # the few rule files the versions came from
        ruleset = parse_rules(yaml.safe_load(content), origin=f"stored rule file {file_id}")
        for version in ruleset.rules:
            canonical = version_document(ruleset, version)
            written[(file_id, version.id)] = (sha256_hex(canonical), version)
    out = []
    for row in versions:  # one per stored rule version
        sha, version = written.get((row.rule_file_id, row.rule_id), ("", None))
        use = version is not None and sha == row.sha256
        out.append(json.loads(json.dumps(version.model_dump(mode="json", by_alias=True)))
                   if use else json.loads(row.content)["rules"][0])  # fmt: skip
    return out


def inputs_query(period: Period) -> Select[Any]:
    """The committed batches with files on the period's days, and the billing batches whose
    billing periods overlap it: ``id, kind, sha256`` (distinct, unordered)."""
    b, f = table(Batch).c, table(BatchFile).c
    last_day = period.end - pd.Timedelta(microseconds=1)
    on_days = (b.kind != "billing") & (f.day >= f"{period.start:%Y-%m-%d}") & (
        f.day <= f"{last_day:%Y-%m-%d}")  # fmt: skip
    billing = (b.kind == "billing") & (b.window_from < period.end.to_pydatetime()) & (
        b.window_to > period.start.to_pydatetime())  # fmt: skip
    return (
        select(b.id, b.kind, b.sha256)
        .join_from(table(BatchFile), table(Batch), b.id == f.batch_id)
        .where(b.status == "committed")
        .where(on_days | billing)
        .distinct()
    )


def month_inputs(connection: Connection, period: Period) -> pd.DataFrame:
    """The committed batches with files on the period's days, and the billing batches whose
    billing periods overlap it: ``batch_id, kind, sha256`` (the run's input fingerprint), by
    id."""
    rows = connection.execute(inputs_query(period).order_by(table(Batch).c.id)).all()
    return pd.DataFrame([tuple(r) for r in rows], columns=["batch_id", "kind", "sha256"])


@dataclass(frozen=True)
class InputSignature:
    """What identifies a month's input set without fetching it (meter traffic: 350,000
    batches): per kind, how many batches and the sum of their ids. Batches only join the set
    with ids above every id in it and leave it by withdrawal, so equal signatures mean equal
    sets (a batch's sha256 never changes)."""

    counts: tuple[tuple[str, int, int], ...]

    def batches(self, kind: str) -> int:
        return sum(n for k, n, _ in self.counts if k == kind)


def month_signature(connection: Connection, period: Period) -> InputSignature:
    """The :class:`InputSignature` of ``period``'s inputs, aggregated by the database."""
    inputs = inputs_query(period).subquery()
    rows = connection.execute(
        select(inputs.c.kind, func.count(), func.sum(inputs.c.id))
        .group_by(inputs.c.kind).order_by(inputs.c.kind)
    ).all()  # fmt: skip
    return InputSignature(tuple((str(k), int(n), int(t or 0)) for k, n, t in rows))


__all__ = [
    "InputSignature",
    "StoredRules",
    "inputs_query",
    "month_inputs",
    "month_signature",
    "stored_rules",
]
