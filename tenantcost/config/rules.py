"""The rule file: dated allocation rules, validated, with errors that name their path.

A rule file holds one or more *rule versions*. Each version applies from its
``effective_from`` until the next one, so history can say which rule produced which number.
Within a version, every cost row is classified by the first ``workloads`` entry whose
``match`` selects it; ``external`` lists costs OpenCost does not see.

Validation is done with pydantic. Every error is reported as one line with the path of the
offending value, for example ``rules[0].workloads[2].reason: required for class 'excluded'``.
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import yaml
from pydantic import (
    Field,
    ValidationError,
    WithJsonSchema,
    field_validator,
    model_validator,
)

from tenantcost.config.base import Strict
from tenantcost.config.billing import BilledEntry, Billing
from tenantcost.config.confidence import ConfidenceThresholds
from tenantcost.config.cost_model import CostModel
from tenantcost.config.focus import Focus
from tenantcost.config.fx import ECB, Fx
from tenantcost.config.keys import EVEN, Key
from tenantcost.config.metrics import Metric, check_metric_names, gauges_of
from tenantcost.config.pricing import Pricing
from tenantcost.config.privacy import Privacy
from tenantcost.config.sources import OpenCostSource, PrometheusSource
from tenantcost.currency import is_currency
from tenantcost.errors import InputError, warn
from tenantcost.limits import (
    EARLIEST_INSTANT_ISO,
    LATEST_INSTANT_ISO,
    MAX_EXTERNAL_AMOUNT,
    MAX_UTC_OFFSET_MINUTES,
)
from tenantcost.suggest import did_you_mean
from tenantcost.tables import COST_PROPERTY_COLUMNS, LABEL_PREFIX

if TYPE_CHECKING:  # pandas is imported where used: check-config starts without it
    import pandas as pd

WorkloadClass = Literal["shared", "direct", "idle", "overhead", "reserve", "excluded"]
MATCH_PROPERTIES: tuple[str, ...] = tuple(COST_PROPERTY_COLUMNS)
"""What a ``match`` may select on: the cost table's property columns (and ``label:<k>``)."""


class WorkloadRule(Strict):
    """One classification entry: which cost rows it selects and what happens to them."""

    match: dict[str, str | list[str]] = Field(default_factory=dict)
    class_: WorkloadClass = Field(alias="class")
    name: str | None = None
    service: str | None = None
    key: Key | None = None
    client: str | None = None
    client_from: str | None = None
    reason: str | None = None

    @field_validator("match")
    @classmethod
    def _known_properties(cls, value: dict[str, str | list[str]]) -> dict[str, str | list[str]]:
        for prop, pattern in value.items():
            if prop not in MATCH_PROPERTIES and not (
                prop.startswith(LABEL_PREFIX) and len(prop) > len(LABEL_PREFIX)
            ):
                raise ValueError(
                    f"unknown match key '{prop}'{did_you_mean(prop, MATCH_PROPERTIES)}; keys are "
                    f"{', '.join(MATCH_PROPERTIES)} and label:<k>"
                )
            if isinstance(pattern, list) and not pattern:
                raise ValueError(f"match.{prop}: empty list matches nothing")
        return value

    @field_validator("client_from")
    @classmethod
    def _known_client_property(cls, value: str | None) -> str | None:
        if value is None:
            return value
        if value in MATCH_PROPERTIES or (
            value.startswith(LABEL_PREFIX) and len(value) > len(LABEL_PREFIX)
        ):
            return value
        raise ValueError(
            f"unknown property '{value}'{did_you_mean(value, MATCH_PROPERTIES)}; use one of "
            f"{', '.join(MATCH_PROPERTIES)} or label:<k>"
        )

    @model_validator(mode="after")
    def _fields_fit_class(self) -> WorkloadRule:
        cls = self.class_
        if cls == "shared":
            if not self.service:
                raise ValueError("service: required for class 'shared'")
            if self.key is None:
                raise ValueError("key: required for class 'shared'")
        elif self.service is not None or self.key is not None:
            raise ValueError(f"service/key: only for class 'shared', not '{cls}'")
        if cls == "direct":
            if (self.client is None) == (self.client_from is None):
                raise ValueError("client/client_from: class 'direct' needs exactly one of them")
        elif self.client is not None or self.client_from is not None:
            raise ValueError(f"client/client_from: only for class 'direct', not '{cls}'")
        if cls == "excluded" and not (self.reason and self.reason.strip()):
            raise ValueError("reason: required for class 'excluded'")
        return self


class ExternalCost(Strict):
    """A cost OpenCost does not see (a third-party service, a managed database)."""

    name: str
    amount: Annotated[
        Decimal,
        Field(ge=0, le=MAX_EXTERNAL_AMOUNT, allow_inf_nan=False),
        # Stated here rather than generated: pydantic's own schema for Decimal changes between
        # releases, and the checked-in config/rules.schema.json must not depend on one.
        WithJsonSchema(
            {"type": "number", "minimum": 0, "maximum": MAX_EXTERNAL_AMOUNT, "title": "Amount"}
        ),
    ]
    per: Literal["hour", "month"]
    key: Key
    services: list[str] | None = None


def _in_range(value: datetime) -> datetime:
    """``value`` in UTC when its offset and instant are those every input may carry
    (:mod:`tenantcost.instants`: ±14:00, 2000-01-01 .. 2100-01-01), else a ValueError the
    rule file's loader names by path. Without pandas: ``check-config`` starts fast."""
    offset = value.utcoffset()
    if offset is not None and abs(offset.total_seconds()) > MAX_UTC_OFFSET_MINUTES * 60:
        raise ValueError(f"the UTC offset of '{value.isoformat()}' is outside -14:00 .. +14:00")
    if not _EARLIEST <= value <= _LATEST:
        raise ValueError(
            f"'{value.isoformat()}' is outside the accepted range {EARLIEST_INSTANT_ISO} .. "
            f"{LATEST_INSTANT_ISO}"
        )
    return value.astimezone(UTC)


_EARLIEST = datetime.fromisoformat(EARLIEST_INSTANT_ISO)
_LATEST = datetime.fromisoformat(LATEST_INSTANT_ISO)


class RuleVersion(Strict):
    """One dated version of the allocation rule."""

    id: str
    effective_from: datetime
    description: str = ""
    workloads: list[WorkloadRule]
    external: list[ExternalCost] = Field(default_factory=list)
    billed: list[BilledEntry] = Field(default_factory=list)
    idle: Literal["keep", "proportional", "even"] = "keep"
    unmatched: Literal["error", "unattributed"] = "error"
    unmatched_billed: Literal["error", "unclassified"] = "error"

    @field_validator("effective_from", mode="before")
    @classmethod
    def _utc(cls, value: Any) -> Any:
        if isinstance(value, datetime):
            return _in_range(value if value.tzinfo else value.replace(tzinfo=UTC))
        if isinstance(value, date):
            return _in_range(datetime(value.year, value.month, value.day, tzinfo=UTC))
        if isinstance(value, str):
            try:  # ISO 8601 without pandas (check-config starts fast); other forms below
                parsed = datetime.fromisoformat(value)
            except ValueError:
                return _in_range(cls._pandas_time(value))
            return _in_range(parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed)
        return value

    @staticmethod
    def _pandas_time(value: str) -> datetime:
        import pandas as pd

        try:
            ts = pd.Timestamp(value)
        except ValueError as exc:
            raise ValueError(f"not a date or time: '{value}'") from exc
        ts = ts.tz_localize("UTC") if ts.tzinfo is None else ts.tz_convert("UTC")
        return ts.to_pydatetime()

    @property
    def shared_services(self) -> list[str]:
        """Services named by shared workloads, in rule order, without repeats."""
        seen: dict[str, None] = {}
        for w in self.workloads:
            if w.class_ == "shared" and w.service:
                seen.setdefault(w.service, None)
        return list(seen)

    @property
    def key_columns(self) -> list[tuple[str, str]]:
        """``(path, column)`` of every key naming a usage column, the path relative to the
        version (``workloads[0].key``, ``external[1].key``): the columns its usage must
        have."""
        keyed: list[tuple[str, Key | None]] = [
            (f"workloads[{j}].key", w.key)
            for j, w in enumerate(self.workloads)
            if w.class_ == "shared" and w.key is not None
        ]
        keyed += [(f"external[{j}].key", e.key) for j, e in enumerate(self.external)]
        keyed += [
            (f"billed[{j}].key", b.key) for j, b in enumerate(self.billed) if b.key is not None
        ]
        return [(where, key) for where, key in keyed if isinstance(key, str) and key != EVEN]

    def source_name(self, entry: int) -> str:
        """The label of a shared workload entry's pool in results: its name, else its service."""
        w = self.workloads[entry]
        return w.name or w.service or f"workloads[{entry}]"

    @model_validator(mode="after")
    def _source_names_unique(self) -> RuleVersion:
        seen: dict[str, str] = {}
        for j, w in enumerate(self.workloads):
            if w.class_ != "shared":
                continue
            label = self.source_name(j)
            if label in seen:
                raise ValueError(
                    f"workloads[{j}].name: '{label}' already labels {seen[label]}; give each "
                    "shared entry of one service a distinct name"
                )
            seen[label] = f"workloads[{j}]"
        for j, e in enumerate(self.external):
            if e.name in seen:
                raise ValueError(f"external[{j}].name: '{e.name}' already labels {seen[e.name]}")
            seen[e.name] = f"external[{j}]"
        for j, b in enumerate(self.billed):
            if b.label in seen:
                raise ValueError(
                    f"billed[{j}].name: '{b.label}' already labels {seen[b.label]}; give the "
                    "entry a distinct name"
                )
            seen[b.label] = f"billed[{j}]"
        return self

    @property
    def billed_services(self) -> list[str]:
        """Services named by shared billed entries (``billed[].services``), in rule order."""
        seen: dict[str, None] = {}
        for b in self.billed:
            for service in b.services or []:
                seen.setdefault(service, None)
        return list(seen)

    @property
    def known_services(self) -> list[str]:
        """Every service whose usage this version uses: shared workloads', then billed
        entries' (their usage splits billed pools, so it is never "ignored")."""
        return list(dict.fromkeys([*self.shared_services, *self.billed_services]))


class Sources(Strict):
    """Where inputs come from when not given on the command line (paths relative to the file)."""

    costs: list[str] = Field(default_factory=list)
    usage: list[str] = Field(default_factory=list)
    prometheus: PrometheusSource | None = None
    opencost: OpenCostSource | None = None

    @field_validator("costs", "usage", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value


class RuleSet(Strict):
    """The whole rule file."""

    currency: Annotated[str, Field(pattern=r"^[A-Z]{3}$")] = "USD"
    hours_per_month: Annotated[int, Field(gt=0)] = 730
    sources: Sources = Field(default_factory=Sources)
    rules: list[RuleVersion]
    cost_model: CostModel | None = None
    confidence: ConfidenceThresholds = Field(default_factory=ConfidenceThresholds)
    privacy: Privacy = Field(default_factory=Privacy)
    focus: Focus = Field(default_factory=Focus)
    pricing: Pricing = Field(default_factory=Pricing)
    billing: Billing | None = None
    fx: Fx | None = None
    presentation: Annotated[str | None, Field(pattern=r"^[A-Z]{3}$")] = None
    metrics: dict[str, Metric] = Field(
        default_factory=dict,
        description="Each usage column's kind: counter (the default for a column not "
        "listed) or gauge (a level sampled over time, split by its time integral).",
    )

    @field_validator("metrics")
    @classmethod
    def _metric_names(cls, value: dict[str, Metric]) -> dict[str, Metric]:
        return check_metric_names(value)

    @property
    def gauges(self) -> dict[str, Metric]:
        """The declared gauges, by name (``metrics:`` with ``kind: gauge``)."""
        return gauges_of(self.metrics)

    @field_validator("currency", "presentation")
    @classmethod
    def _iso_4217(cls, value: str | None) -> str | None:
        if value is not None and not is_currency(value):
            raise ValueError(f"unknown currency code '{value}': expected an ISO 4217 code")
        return value

    @field_validator("rules")
    @classmethod
    def _dated_in_order(cls, value: list[RuleVersion]) -> list[RuleVersion]:
        if not value:
            raise ValueError("at least one rule version is required")
        ids = [r.id for r in value]
        for i, rid in enumerate(ids):
            if rid in ids[:i]:
                raise ValueError(f"[{i}].id: duplicate rule id '{rid}'")
        for i in range(1, len(value)):
            prev, cur = value[i - 1], value[i]
            if cur.effective_from <= prev.effective_from:
                raise ValueError(
                    f"[{i}].effective_from: {cur.effective_from.date()} is not after "
                    f"rules[{i - 1}] '{prev.id}' ({prev.effective_from.date()}); versions must be "
                    "listed in date order, one per date"
                )
        return value

    def version_index(self, starts: pd.Series) -> pd.Series:
        """Index of the rule version in force at each timestamp (-1 before the first one)."""
        import pandas as pd

        edges = pd.DatetimeIndex([r.effective_from for r in self.rules]).as_unit("ns")
        positions = edges.searchsorted(pd.DatetimeIndex(starts).as_unit("ns"), side="right") - 1
        return pd.Series(positions, index=starts.index, dtype="int64")

    def with_key(self, key: Key) -> RuleSet:
        """The same rules with one key on every shared workload and every external cost."""
        versions = []
        for version in self.rules:
            workloads = [
                w.model_copy(update={"key": key}) if w.class_ == "shared" else w
                for w in version.workloads
            ]
            external = [e.model_copy(update={"key": key}) for e in version.external]
            billed = [
                b.model_copy(update={"key": key}) if b.class_ == "shared" else b
                for b in version.billed
            ]
            versions.append(
                version.model_copy(
                    update={"workloads": workloads, "external": external, "billed": billed}
                )
            )
        return self.model_copy(update={"rules": versions})


_RELATIVE_PATH = re.compile(r"[a-z_]+\[\d+\](\.[a-z_]+)*")
"""A path below the validated value that a message may start with (``workloads[2].name``)."""


def _format_loc(loc: tuple[int | str, ...]) -> str:
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        elif part in ("str", "WeightsKey", "list[str]", "function-after[_not_empty(), dict]"):
            continue  # union-branch markers pydantic adds to the location
        else:
            path += f".{part}" if path else str(part)
    return path


def _format_validation_error(exc: ValidationError) -> tuple[str, str]:
    """The first error as (path, message), with pydantic's wording made plain."""
    errors = exc.errors()
    first = errors[0]
    raw_loc = tuple(first["loc"])
    if "key" in raw_loc:
        # A key is a union (column name | weights); pick the branch that fits the input.
        key_errors = [
            e
            for e in errors
            if tuple(e["loc"])[: raw_loc.index("key") + 1] == raw_loc[: raw_loc.index("key") + 1]
        ]
        weights = [e for e in key_errors if "WeightsKey" in tuple(e["loc"])]
        if isinstance(first.get("input"), dict) and weights:
            first = weights[0]
        elif not isinstance(first.get("input"), dict | str):
            loc = _format_loc(raw_loc[: raw_loc.index("key") + 1])
            return loc, (
                f"must be a usage column name, 'even', or {{weights: {{client: w}}}}; "
                f"got {first.get('input')!r}"
            )
    loc = _format_loc(tuple(first["loc"]))
    msg = str(first["msg"])
    if first["type"] in ("literal_error", "string_pattern_mismatch", "enum"):
        msg = f"{msg}; got {first.get('input')!r}"
    if first["type"] == "extra_forbidden":
        parent, _, key = loc.rpartition(".")
        return parent or "(top level)", f"unknown key '{key}'"
    if first["type"] == "missing":
        return loc, "required"
    msg = msg.removeprefix("Value error, ")
    # A message that starts with a sub-path ("reason: required ...") extends the location.
    head, sep, rest = msg.partition(": ")
    if sep and (head.startswith("[") or head.replace("_", "").replace("/", "").isalpha()):
        if head.startswith("["):
            return f"{loc}{head}", rest
        if " " not in head:
            return f"{loc}.{head}" if loc else head, rest
    if sep and _RELATIVE_PATH.fullmatch(head):  # a version's check names an entry: billed[0].name
        return f"{loc}.{head}" if loc else head, rest
    return loc or "(top level)", msg


def parse_rules(data: Any, origin: str = "<rules>", base_dir: Path | None = None) -> RuleSet:
    """Validate an already-parsed rule document; ``origin`` names it in errors."""
    if not isinstance(data, dict):
        raise InputError("the rule file must be a mapping with a 'rules' list", file=origin)
    try:
        ruleset = RuleSet.model_validate(data)
    except ValidationError as exc:
        where, message = _format_validation_error(exc)
        raise InputError(message, file=origin, where=where) from None
    if base_dir is not None and ruleset.billing is not None:
        billing = ruleset.billing
        ruleset = ruleset.model_copy(
            update={
                "billing": billing.model_copy(
                    update={
                        "sources": [p if "://" in p else str(base_dir / p) for p in billing.sources]
                    }
                )
            }
        )
    if base_dir is not None and ruleset.fx is not None:
        fx = ruleset.fx
        ruleset = ruleset.model_copy(
            update={"fx": fx.model_copy(update={"rates": [_beside(base_dir, p) for p in fx.rates]})}
        )
    if base_dir is not None:
        ruleset = ruleset.model_copy(
            update={
                "sources": ruleset.sources.model_copy(
                    update={
                        "costs": [str(base_dir / p) for p in ruleset.sources.costs],
                        "usage": [
                            p if "://" in p else str(base_dir / p) for p in ruleset.sources.usage
                        ],
                    }
                )
            }
        )
    return ruleset


def _beside(base_dir: Path, rates: str) -> str:
    """A rates path relative to the rule file (``ecb`` and URLs as written)."""
    return rates if rates == ECB or "://" in rates else str(base_dir / rates)


def load_rules(path: str | Path) -> RuleSet:
    """Read and validate a YAML rule file."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError("no such file", file=str(path)) from None
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", file=str(path)) from None
    try:
        data = yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else None
        raise InputError(f"not valid YAML: {exc.problem}", file=str(path), where=where) from None
    except yaml.YAMLError as exc:
        raise InputError(f"not valid YAML: {exc}", file=str(path)) from None
    return parse_rules(data, origin=str(path), base_dir=path.parent)


def check_against_usage(
    ruleset: RuleSet,
    metrics: list[str],
    services: list[str],
    origin: str = "<rules>",
    usage_origin: str = "usage",
) -> None:
    """Check the rules against the usage data's columns and services.

    Errors (``InputError``): a key naming a column the usage data lacks (workloads', externals'
    and billed entries' keys); a usage service that no shared workload and no billed entry's
    ``services`` of any rule version names (its usage would be silently ignored).
    Warning: a shared workload's service, or a service of ``billed[].services``, that never
    appears in the usage data (its cost will be reported as unattributed).
    """
    columns = ", ".join(metrics) if metrics else "(none)"
    for i, version in enumerate(ruleset.rules):
        for where, key in version.key_columns:
            if key not in metrics:
                raise InputError(
                    f"unknown usage column '{key}'{did_you_mean(key, metrics)}; "
                    f"columns are {columns}",
                    file=origin,
                    where=f"rules[{i}].{where}",
                )
        for j, ext in enumerate(version.external):
            for service in ext.services or []:
                if service not in version.shared_services:
                    raise InputError(
                        f"service '{service}' is not named by any shared workload of rule "
                        f"'{version.id}'",
                        file=origin,
                        where=f"rules[{i}].external[{j}].services",
                    )
    named = {s for version in ruleset.rules for s in version.known_services}
    unknown = sorted(set(services) - named)
    if unknown:
        raise InputError(
            f"service '{unknown[0]}' is not named by any shared workload or billed entry in "
            "the rules "
            f"({', '.join(sorted(named)) or 'none'}); its usage would be ignored",
            file=usage_origin,
            column="service",
        )
    shared = {s for version in ruleset.rules for s in version.shared_services}
    for service in sorted(named - set(services)):
        if service in shared:
            warn(
                f"{origin}: shared service '{service}' never appears in the usage data; "
                "its cost is reported as unattributed"
            )
        else:
            warn(
                f"{origin}, {_billed_services_path(ruleset, service)}: service '{service}' "
                "never appears in the usage data; a billed pool without usage of its services "
                "is unattributed"
            )


def _billed_services_path(ruleset: RuleSet, service: str) -> str:
    """The rule path of the first ``billed[].services`` naming ``service``."""
    for i, version in enumerate(ruleset.rules):
        for j, entry in enumerate(version.billed):
            if service in (entry.services or []):
                return f"rules[{i}].billed[{j}].services"
    return "billed[].services"
