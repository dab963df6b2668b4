"""Where a run's costs come from, and the ``collect`` command's files and summary.

Precedence for ``allocate``, ``compare`` and ``reconcile`` (:func:`load_costs`):

1. ``--costs`` files and folders (``--opencost-url`` at the same time is an error);
2. the OpenCost API at ``--opencost-url``, else at ``sources.opencost.url`` of the rule file,
   for the period of ``--month`` or ``--from``/``--to`` (required then);
3. ``sources.costs`` of the rule file;
4. otherwise an error.

``collect`` (:func:`collect_to_folder`) asks the API for a period and writes the raw responses
(``responses/opencost-<start>-<end>.json`` and ``responses/requests.tsv``) and the canonical
cost table ``costs.csv`` (text cells neutralised for spreadsheets, :mod:`tenantcost.csv_cells`)
into a folder, which any later run can read with ``--costs``. Its summary on the terminal is a
writer's (``tenantcost.writers.collection``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd
from pydantic import ValidationError

from tenantcost.config.rules import RuleSet
from tenantcost.config.sources import OpenCostSource
from tenantcost.csv_cells import neutralised
from tenantcost.errors import InputError
from tenantcost.readers.costs import read_costs
from tenantcost.timefmt import ISO_Z_FORMAT
from tenantcost.windows import Period

if TYPE_CHECKING:  # the API client (requests, urllib3) is imported only when costs come from it
    from tenantcost.readers.opencost_api import Collection

RESPONSES_FOLDER = "responses"
"""Sub-folder of ``--out`` that holds the raw OpenCost responses."""
COSTS_FILE = "costs.csv"
_OPTION = {"url": "--opencost-url", "step": "--step"}


@dataclass(frozen=True)
class CostInput:
    """The cost table of a run and where it came from."""

    costs: pd.DataFrame
    paths: list[Path]
    """Files read (``--costs``, ``sources.costs``) or raw responses saved (API)."""
    source: OpenCostSource | None = None
    collection: Collection | None = None

    @property
    def description(self) -> str:
        if self.source is not None:
            return f"OpenCost API {self.source.url}"
        return ", ".join(str(p) for p in self.paths)


def opencost_source(
    ruleset: RuleSet | None, url: str | None = None, step: str | None = None
) -> OpenCostSource | None:
    """``sources.opencost`` with the command-line overrides; ``None`` when no URL is set."""
    base = ruleset.sources.opencost if ruleset is not None else None
    if base is None and url is None:
        return None
    data: dict[str, Any] = base.model_dump() if base is not None else {}
    overrides = {k: v for k, v in (("url", url), ("step", step)) if v is not None}
    if not overrides:
        source = base
    else:
        try:
            source = OpenCostSource.model_validate({**data, **overrides})
        except ValidationError as exc:
            first = exc.errors()[0]
            field = str(first["loc"][0]) if first["loc"] else ""
            message = str(first["msg"]).removeprefix("Value error, ")
            option = _OPTION.get(field) or next(
                (_OPTION[k] for k in ("step", "url") if k in overrides), "sources.opencost"
            )
            raise InputError(f"{option}: {message}") from None
    return source if source is not None and source.url else None


def load_costs(
    ruleset: RuleSet,
    config: str | Path,
    costs: list[Path] | None,
    *,
    opencost_url: str | None = None,
    step: str | None = None,
    period: Period | None = None,
    responses_dir: Path | None = None,
) -> CostInput:
    """The run's cost table, from files or the OpenCost API (see the module docstring)."""
    if costs and opencost_url:
        raise InputError("give either --costs or --opencost-url, not both")
    if costs:
        if step is not None:
            raise InputError("--step applies to the OpenCost API, not to --costs files")
        return CostInput(read_costs(costs), list(costs))
    source = opencost_source(ruleset, opencost_url, step)
    if source is not None:
        if period is None:
            where = "--opencost-url" if opencost_url else f"sources.opencost.url of {config}"
            raise InputError(
                f"costs from the OpenCost API ({where}) need a period: give --month or --from/--to"
            )
        from tenantcost.readers.opencost_api import collect_allocations

        collection = collect_allocations(source, period.start, period.end, responses_dir)
        saved = [r.file for r in collection.responses if r.file is not None]
        return CostInput(collection.costs, saved, source, collection)
    if step is not None:
        raise InputError("--step applies to the OpenCost API: give --opencost-url too")
    paths = [Path(p) for p in ruleset.sources.costs]
    if not paths:
        raise InputError(
            "no cost input: give --costs or --opencost-url, or set sources.costs or "
            "sources.opencost.url in the rule file",
            file=str(config),
        )
    return CostInput(read_costs(paths), paths)


def collect_to_folder(
    source: OpenCostSource, period: Period, out: Path | None
) -> tuple[Collection, list[Path]]:
    """Ask the API for ``period``; with ``out``, save responses and ``costs.csv`` there."""
    from tenantcost.readers.opencost_api import collect_allocations

    responses_dir = out / RESPONSES_FOLDER if out is not None else None
    collection = collect_allocations(source, period.start, period.end, responses_dir)
    written: list[Path] = []
    if out is not None:
        assert responses_dir is not None
        written = [r.file for r in collection.responses if r.file is not None]
        written.append(responses_dir / "requests.tsv")
        path = out / COSTS_FILE
        try:
            neutralised(collection.costs).to_csv(path, index=False, date_format=ISO_Z_FORMAT)
        except OSError as exc:
            raise InputError(f"cannot write: {exc.strerror}", file=str(path)) from None
        written.append(path)
    return collection, written
