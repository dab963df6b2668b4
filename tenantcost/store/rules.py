"""Rule file versions in the store (``tenantcost rules load``): append-only, by content.

A rule version id is a promise: "saas-2026-11" means one thing forever, because issued
statements name it. So the store keeps, per version id, its canonical content (a rule
document of that one version, with the ``currency`` and ``hours_per_month`` it is read with,
as sorted JSON of the validated model: comments, key order, quoting and spelled-out defaults
do not count as changes) and refuses a file that gives an existing id another content.

Loading the same file again (same bytes) writes nothing. A different file whose versions are
all known or new is stored as a new ``rule_file`` row (its other settings, such as
``confidence`` or ``sources``, may have changed) with its new versions. Versions absent from
a later file stay: the store never forgets a rule it may have used. Two versions may not
share an ``effective_from`` (which one is in force would be ambiguous), and every version of
a store has one currency. A new version that would be in force for an hour of a closed month
is refused (:func:`tenantcost.store.month_state.refuse_rule_version`).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy import Connection, Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from tenantcost.config.rules import RuleSet, load_rules
from tenantcost.config.rules import RuleVersion as RuleVersionModel
from tenantcost.errors import InputError
from tenantcost.store.models import RuleFile, RuleVersion, utcnow
from tenantcost.store.month_state import refuse_rule_version
from tenantcost.store.usage_metrics import declare_metrics


@dataclass(frozen=True)
class Loaded:
    """What ``rules load`` did: the file's sha256, and the version ids it added or found."""

    sha256: str
    already_loaded: bool
    new: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)


def version_document(ruleset: RuleSet, version: RuleVersionModel) -> str:
    """The canonical content of one version: a rule document (``parse_rules`` reads it back)
    holding that version and the file-level fields its figures depend on."""
    document = {
        "currency": ruleset.currency,
        "hours_per_month": ruleset.hours_per_month,
        "rules": [version.model_dump(mode="json", by_alias=True)],
    }
    return json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def sha256_hex(data: bytes | str) -> str:
    """The hex sha256 of ``data`` (text as UTF-8)."""
    return hashlib.sha256(data.encode("utf-8") if isinstance(data, str) else data).hexdigest()


def load_rule_file(
    engine: Engine | Connection, path: Path, actor: str, ruleset: RuleSet | None = None
) -> Loaded:
    """Store what is new in the rule file ``path`` (validated here unless ``ruleset`` is its
    validated content), in one transaction: all or nothing. Given a connection (the
    command's :func:`~tenantcost.store.lock.write_transaction`), it joins its transaction."""
    if ruleset is None:  # a bad file stops here, before the store is touched
        ruleset = load_rules(path)
    raw = path.read_bytes()
    file_sha = sha256_hex(raw)
    contents = [version_document(ruleset, v) for v in ruleset.rules]
    with Session(engine) as session:
        if session.exec(select(RuleFile.id).where(RuleFile.sha256 == file_sha)).first() is not None:
            return Loaded(file_sha, already_loaded=True, unchanged=[v.id for v in ruleset.rules])
        _check_currency(session, ruleset, path)
        now = utcnow()
        rule_file = RuleFile(sha256=file_sha, origin=str(path), content=raw.decode("utf-8"),
                             currency=ruleset.currency, loaded_at=now, actor=actor)  # fmt: skip
        session.add(rule_file)
        session.flush()
        assert rule_file.id is not None
        declare_metrics(session.connection(), ruleset, rule_file.id, str(path))
        loaded = Loaded(file_sha, already_loaded=False)
        for i, (version, content) in enumerate(zip(ruleset.rules, contents, strict=True)):
            if _known(session, version, content, path, i):
                loaded.unchanged.append(version.id)
                continue
            refuse_rule_version(session.connection(), version.id, version.effective_from)
            row = RuleVersion(rule_id=version.id, effective_from=version.effective_from,
                              content=content, sha256=sha256_hex(content),
                              rule_file_id=rule_file.id, loaded_at=now, actor=actor)  # fmt: skip
            session.add(row)
            loaded.new.append(version.id)
        try:
            session.commit()
        except IntegrityError:
            raise InputError(
                "another process stored rules at the same time; run the command again",
                file=str(path),
            ) from None
    return loaded


def _known(
    session: Session, version: RuleVersionModel, content: str, path: Path, index: int
) -> bool:
    """True if the store holds this version with this content; refuses a changed one and a
    new one dated like a stored one."""
    stored = session.exec(select(RuleVersion).where(RuleVersion.rule_id == version.id)).first()
    if stored is not None:
        if stored.sha256 == sha256_hex(content):
            return True
        raise InputError(
            f"rule version '{version.id}' is already stored with other content (sha256 "
            f"{stored.sha256[:12]}, loaded {stored.loaded_at:%Y-%m-%d %H:%M} UTC by "
            f"{stored.actor}); a stored version never changes: give the changed rule a new id "
            "and effective_from",
            file=str(path),
            where=f"rules[{index}].id",
        )
    same_date = session.exec(
        select(RuleVersion).where(RuleVersion.effective_from == version.effective_from)
    ).first()
    if same_date is not None:
        raise InputError(
            f"effective_from {version.effective_from.isoformat()} is already the start of "
            f"stored rule version '{same_date.rule_id}'; one version per date",
            file=str(path),
            where=f"rules[{index}].effective_from",
        )
    return False


def _check_currency(session: Session, ruleset: RuleSet, path: Path) -> None:
    first = session.exec(select(RuleFile).order_by(col(RuleFile.id))).first()
    if first is not None and first.currency != ruleset.currency:
        raise InputError(
            f"currency {ruleset.currency} differs from the store's {first.currency}; one store "
            "holds one currency",
            file=str(path),
            where="currency",
        )


def stored_versions(engine: Engine) -> list[RuleVersion]:
    """Every stored rule version, by effective date."""
    with Session(engine) as session:
        return list(session.exec(select(RuleVersion).order_by(col(RuleVersion.effective_from))))
