"""The rule file's built-in defaults, read from ``defaults.yaml`` (package data) on first use.

The defaults a rule file gets for what it leaves out (Prometheus query templates and labels,
the OpenCost aggregation and request settings, the confidence bands, the sheets' privacy
threshold) live in one documented YAML file rather than as constants spread over the models:
a person checking why a figure was graded "medium" or which PromQL ran reads one file, the
same one the code reads. The file sits inside the package so an installed wheel has it; the
repository's ``config/defaults.yaml`` is a link to it, never a second copy.

The file is read when a model first needs a default (pydantic ``default_factory``), not at
import, and parsed once per process (:func:`load_defaults` is cached). Callers get deep copies,
so nothing can change the cached values under a running allocation.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable
from importlib import resources
from typing import Any

from tenantcost.errors import InternalError

DEFAULTS_FILE = "defaults.yaml"
SECTIONS: tuple[str, ...] = (
    "prometheus",
    "opencost",
    "confidence",
    "privacy",
    "focus",
    "pricing",
)
"""Top-level sections of the defaults file, each a mapping of one rule-file section's keys."""


def defaults_text() -> str:
    """The defaults file as shipped (with its comments), for people and for ``load_defaults``."""
    resource = resources.files(__package__ or "tenantcost.config").joinpath(DEFAULTS_FILE)
    try:
        return resource.read_text(encoding="utf-8")
    except OSError as exc:
        raise InternalError(
            f"tenantcost's defaults file {DEFAULTS_FILE} cannot be read ({exc}); reinstall "
            "tenantcost"
        ) from None


@functools.cache
def load_defaults() -> dict[str, dict[str, Any]]:
    """The parsed defaults file, checked for its sections; read once per process."""
    import yaml  # on first use only: commands that never validate a rule file skip it

    try:
        data = yaml.safe_load(defaults_text())
    except yaml.YAMLError as exc:
        raise InternalError(f"tenantcost's {DEFAULTS_FILE} is not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise InternalError(f"tenantcost's {DEFAULTS_FILE} must be a mapping of sections")
    for section in SECTIONS:
        if not isinstance(data.get(section), dict):
            raise InternalError(f"tenantcost's {DEFAULTS_FILE} has no '{section}' mapping")
    return data


def default(section: str, key: str) -> Any:
    """One default value (a deep copy: callers may keep or change it freely)."""
    values = load_defaults()[section]
    if key not in values:
        raise InternalError(f"tenantcost's {DEFAULTS_FILE} has no {section}.{key}")
    return copy.deepcopy(values[key])


class DefaultFactory:
    """A pydantic ``default_factory`` for one key of the defaults file.

    A class rather than a lambda so that it names its key (in reprs and in the JSON Schema
    generator, which calls it to show the default) and so the file is read at first
    validation, not when the model class is defined.
    """

    def __init__(self, section: str, key: str) -> None:
        self.section = section
        self.key = key

    def __call__(self) -> Any:
        return default(self.section, self.key)

    def __repr__(self) -> str:
        return f"DefaultFactory({self.section}.{self.key})"


def factory(section: str, key: str) -> Callable[[], Any]:
    """The ``default_factory`` of ``section.key`` (see :class:`DefaultFactory`)."""
    return DefaultFactory(section, key)
