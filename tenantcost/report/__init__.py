"""Report packs: per-client cost sheets, the finance summary and an index (HTML, PDF, MD).

* :mod:`~tenantcost.report.pack` runs the core under the rule and every alternative key;
* :mod:`~tenantcost.report.confidence` grades each client's figure;
* :mod:`~tenantcost.report.changes` detects rule changes (the denominator changed);
* :mod:`~tenantcost.report.sheet` and :mod:`~tenantcost.report.summary` turn the pack into
  display-ready data; :mod:`~tenantcost.report.charts` draws inline SVG;
* :mod:`~tenantcost.report.render` fills the jinja2 templates and writes the files;
  :mod:`~tenantcost.report.pdf` writes PDFs in a process pool.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tenantcost.report.pack import ReportInputs, ReportPack, build_pack
    from tenantcost.report.render import FORMATS, parse_formats, write_pack

__all__ = ["FORMATS", "ReportInputs", "ReportPack", "build_pack", "parse_formats", "write_pack"]

_HOMES = {
    "ReportInputs": "pack",
    "ReportPack": "pack",
    "build_pack": "pack",
    "FORMATS": "render",
    "parse_formats": "render",
    "write_pack": "render",
}


def __getattr__(name: str) -> Any:
    """Import on first use: a PDF worker process imports :mod:`tenantcost.report.pdf` only,
    not pandas, DuckDB and jinja2 through the whole package."""
    if name in _HOMES:
        return getattr(importlib.import_module(f"tenantcost.report.{_HOMES[name]}"), name)
    raise AttributeError(f"module 'tenantcost.report' has no attribute '{name}'")
