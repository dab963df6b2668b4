"""The rule file's JSON Schema, generated from the pydantic models.

Editors (VS Code's YAML extension, JetBrains IDEs, any yaml-language-server client) complete
and check a rule file against a JSON Schema as it is typed; generating that schema from the
models that validate the file keeps the two from disagreeing. ``tenantcost schema`` prints it
and the repository keeps a copy in ``config/rules.schema.json`` (a test fails when that copy is
stale). The schema catches the shape (unknown keys, types, enums, ranges); rules across fields
(``service`` required for ``class: shared``, dates in order) remain ``check-config``'s.
"""

from __future__ import annotations

from typing import Any

from pydantic.json_schema import GenerateJsonSchema, JsonSchemaMode, JsonSchemaValue
from pydantic_core import core_schema

from tenantcost.config.defaults import DefaultFactory

SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"
SCHEMA_TITLE = "tenantcost rule file"

_DATE_OR_TIME: dict[str, Any] = {
    "anyOf": [
        {"type": "string", "format": "date"},
        {"type": "string", "format": "date-time"},
    ],
    "description": "A date (2026-11-01, midnight UTC) or a time (2026-11-15T12:00:00Z); a "
    "time without zone is UTC.",
    "title": "Effective From",
}
"""``effective_from`` as the validator accepts it: YAML users write a bare date."""


class _RuleFileSchema(GenerateJsonSchema):
    """Shows the defaults that come from ``defaults.yaml`` (pydantic skips factory defaults)."""

    def get_default_value(self, schema: core_schema.WithDefaultSchema) -> Any:
        made = schema.get("default_factory")
        if isinstance(made, DefaultFactory):
            return made()
        return super().get_default_value(schema)

    def generate(
        self, schema: core_schema.CoreSchema, mode: JsonSchemaMode = "validation"
    ) -> JsonSchemaValue:
        out = super().generate(schema, mode=mode)
        return {"$schema": SCHEMA_DIALECT, **out}


_PATTERN: dict[str, Any] = {
    "anyOf": [
        {"type": "string"},
        {"items": {"type": "string"}, "minItems": 1, "type": "array"},
    ],
    "description": "A `*` glob, or a list of globs any of which may hold.",
}


def _billed_match(*, min_properties: int) -> dict[str, Any]:
    """A billed ``match:`` as ``check_match`` accepts it: the FOCUS columns spelled as in the
    specification, and ``tags:``. The model types it as a plain mapping (the columns are
    checked by name, with a "did you mean"), so the schema spells the columns out here, for
    completion in editors."""
    from tenantcost.config.billing import BILLING_MATCH_COLUMNS, TAGS

    columns: dict[str, Any] = {c: {"$ref": "#/$defs/BilledPattern"} for c in BILLING_MATCH_COLUMNS}
    columns[TAGS] = {
        "additionalProperties": {"$ref": "#/$defs/BilledPattern"},
        "description": "Tag key -> pattern; the tag must be present and non-empty.",
        "minProperties": 1,
        "type": "object",
    }
    return {
        "additionalProperties": False,
        "description": "FOCUS column (or tags) -> pattern; every key must hold.",
        "minProperties": min_properties,
        "properties": columns,
        "title": "Match",
        "type": "object",
    }


def rules_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a rule file, deterministic for a given tenantcost."""
    from tenantcost.config.rules import RuleSet  # the models only when a schema is asked for

    schema = RuleSet.model_json_schema(by_alias=True, schema_generator=_RuleFileSchema)
    schema["title"] = SCHEMA_TITLE
    version = schema["$defs"]["RuleVersion"]["properties"]
    version["effective_from"] = dict(_DATE_OR_TIME)
    defs = schema["$defs"]
    defs["BilledPattern"] = dict(_PATTERN)
    defs["BilledEntry"]["properties"]["match"] = _billed_match(min_properties=0)
    defs["BillingCluster"]["properties"]["match"] = _billed_match(min_properties=1)
    schema["$defs"] = dict(sorted(defs.items()))
    return schema
