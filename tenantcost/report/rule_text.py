"""The rule in plain language, as it applies to one client.

A client defends its figure by reading how it was made: which key splits which workload and
why, what is in scope, what was left out and why, and how idle capacity is treated. The text is
built from the rule versions in force and the workloads actually seen in the period, and only
ever says what concerns the reader: direct entries of other clients and other clients' weights
are left out, and every free-text string passes the sheet's redactor.

A pool whose figures the sheet withholds (:func:`tenantcost.report.privacy.withheld_pools`)
keeps them withheld here too: an external cost's rate ("0.065 USD per hour") times the hours
of the period *is* the pool's cost, so the text of a withheld external cost names it and its
key but not its amount. Nothing else in the rule text is a figure of a pool: the keys and
services say how a pool is split, and a weight is the reader's own contract.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass, field

from tenantcost.allocate import AllocationResult
from tenantcost.config.billing import describe_match
from tenantcost.config.keys import EVEN, Key, WeightsKey
from tenantcost.config.rules import RuleVersion
from tenantcost.kinds import LineKind
from tenantcost.reconcile import exclusion_summary
from tenantcost.report.display import key_label


@dataclass(frozen=True)
class RuleText:
    """One rule version, described for one client."""

    id: str
    effective_from: str
    why: str
    splits: list[str] = field(default_factory=list)
    direct: list[str] = field(default_factory=list)
    idle: str = ""
    unmatched: str = ""


@dataclass(frozen=True)
class Scope:
    """What is in and out of the client perimeter in the period."""

    rules: list[RuleText]
    not_charged: list[str]
    excluded: list[tuple[str, str]]
    """(workload, reason) of every excluded workload seen in the period."""


def _match(match: dict[str, str | list[str]]) -> str:
    if not match:
        return "every remaining cost row"
    parts = []
    for prop, pattern in match.items():
        values = pattern if isinstance(pattern, list) else [pattern]
        parts.append(f"{prop} {' or '.join(values)}")
    return "workloads with " + ", ".join(parts)


def _key_phrase(key: Key, client: str, where: str = "on the service") -> str:
    """How ``key`` splits a pool, for ``client``. Keys whose parts are fixed by contract rather
    than measured (``even``, weights) say that a part tells the others' parts: that is the
    contract, not something the sheet gives away."""
    if isinstance(key, WeightsKey):
        mine = key.weights.get(client)
        yours = f"your weight is {mine:g}" if mine is not None else "you have no weight in it"
        return (
            f"by fixed contractual weights ({yours}); by contract, each active client's part "
            "is in proportion to its weight, so your part and the weights give the others' parts"
        )
    if key == EVEN:
        return (
            f"in equal parts among the clients with usage {where} in each hour; by contract, "
            "every such client pays the same part of that hour's cost as you"
        )
    label = key_label(key)
    return (
        f"by {label} (usage column {key}): each client's {label} as a share of all {label} "
        f"{where} in each hour"
    )


IDLE_TEXT = {
    "keep": (
        "Idle capacity (node capacity no workload requested) is not charged to clients: it "
        "stays on a line of its own, owned by the cluster operator."
    ),
    "proportional": (
        "Idle capacity is shared among clients in proportion to each client's cost in each "
        "hour; your part is the line 'idle' above."
    ),
    "even": (
        "Idle capacity is shared in equal parts among the clients with a cost in each hour; "
        "your part is the line 'idle' above."
    ),
}
UNMATCHED_TEXT = {
    "error": "Every cost row must match an entry of the rule; the run fails otherwise.",
    "unattributed": (
        "A cost row that matches no entry is reported as unclassified and charged to nobody."
    ),
}


WITHHELD_RATE = "its amount is withheld, as the source cost in section 1"
"""What an external cost's text says in place of its rate when its pool is withheld."""


def describe_version(
    version: RuleVersion,
    client: str,
    redact: Callable[[str], str],
    currency: str,
    withheld: Collection[str] = (),
) -> RuleText:
    """One rule version as sentences for ``client``; ``withheld``: the external costs whose
    pool figures are withheld (their rate is left out: rate times hours is the pool's cost)."""
    splits = []
    direct = []
    for j, w in enumerate(version.workloads):
        if w.class_ == "shared" and w.key is not None:
            splits.append(
                redact(
                    f"{version.source_name(j)} ({_match(dict(w.match))}; service {w.service}): "
                    f"split {_key_phrase(w.key, client)}."
                )
            )
        elif w.class_ == "direct" and w.client == client:
            direct.append(redact(f"{_match(dict(w.match))}: charged to you alone."))
        elif w.class_ == "direct" and w.client_from:
            direct.append(
                redact(
                    f"{_match(dict(w.match))}: charged directly to the client named by their "
                    f"{w.client_from}."
                )
            )
    for e in version.external:
        services = e.services or version.shared_services
        where = f"on {' and '.join(services)} together" if services else "on no service"
        rate = WITHHELD_RATE if e.name in withheld else f"{e.amount} {currency} per {e.per}"
        splits.append(
            redact(
                f"{e.name} (external cost not seen by OpenCost, {rate}): "
                f"split {_key_phrase(e.key, client, where)}."
            )
        )
    _billed(version, client, redact, splits, direct)
    return RuleText(
        id=redact(version.id),
        effective_from=version.effective_from.date().isoformat(),
        why=redact(version.description or "(the rule file gives no description)"),
        splits=splits,
        direct=direct,
        idle=IDLE_TEXT[version.idle],
        unmatched=UNMATCHED_TEXT[version.unmatched],
    )


def _billed(
    version: RuleVersion,
    client: str,
    redact: Callable[[str], str],
    splits: list[str],
    direct: list[str],
) -> None:
    """The version's ``billed:`` entries that reach clients: shared ones (split like external
    costs, over the usage of their services) and the direct ones that concern ``client``."""
    for b in version.billed:
        lines = f"{b.label} (billed lines: {describe_match(b.match)})"
        if b.class_ == "shared" and b.key is not None:
            where = f"on {' and '.join(b.services or [])} together"
            splits.append(redact(f"{lines}: split {_key_phrase(b.key, client, where)}."))
        elif b.class_ == "direct" and b.client == client:
            direct.append(redact(f"{lines}: charged to you alone."))
        elif b.class_ == "direct" and b.client_from is not None:
            direct.append(
                redact(
                    f"{lines}: charged directly to the client named by their tag "
                    f"{b.client_from.tag}."
                )
            )


@dataclass(frozen=True)
class SeenWorkloads:
    """The residual and excluded workloads of a period, before redaction: the same for every
    sheet of a pack, so found once (:func:`seen_workloads`), not once per client."""

    not_charged: list[str]
    excluded: list[tuple[str, str]]


def seen_workloads(result: AllocationResult) -> SeenWorkloads:
    """The overhead and reserve workloads and the excluded ones (with reasons) of the period."""
    residual = result.residual
    labels = {"overhead": "overhead (shared operation)", "reserve": "reserve (capacity kept free)"}
    not_charged = []
    for cls, label in labels.items():
        names = sorted(residual.loc[residual["class"] == cls, "name"].astype(str).unique())
        if names:
            not_charged.append(f"{label}: {', '.join(names)}")
    excluded = [(str(e["name"]), str(e["reason"])) for e in exclusion_summary(result)]
    return SeenWorkloads(not_charged, excluded)


def scope(
    result: AllocationResult,
    client: str,
    redact: Callable[[str], str],
    seen: SeenWorkloads | None = None,
    hidden: Collection[tuple[str, str, str]] = (),
) -> Scope:
    """The rule versions of the period and the residual and excluded workloads seen in it
    (``seen``: :func:`seen_workloads` of ``result``, computed once per pack; ``hidden``: the
    withheld ``(kind, source, key)`` pools of the sheet)."""
    seen = seen if seen is not None else seen_workloads(result)
    withheld = {source for kind, source, _ in hidden if kind == LineKind.EXTERNAL}
    return Scope(
        rules=[
            describe_version(v, client, redact, result.currency, withheld) for v in result.rules
        ],
        not_charged=[redact(text) for text in seen.not_charged],
        excluded=[(redact(name), redact(reason)) for name, reason in seen.excluded],
    )
