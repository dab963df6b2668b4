"""Report packs: per-client cost sheets, the finance summary and an index (HTML, PDF, MD).

* :mod:`~tenantcost.report.pack` runs the core under the rule and every alternative key;
* :mod:`~tenantcost.report.confidence` grades each client's figure;
* :mod:`~tenantcost.report.changes` detects rule changes (the denominator changed);
* :mod:`~tenantcost.report.sheet` and :mod:`~tenantcost.report.summary` turn the pack into
  display-ready data; :mod:`~tenantcost.report.charts` draws inline SVG;
* :mod:`~tenantcost.report.render` fills the jinja2 templates and writes the files.
"""

from tenantcost.report.pack import ReportInputs, ReportPack, build_pack
from tenantcost.report.render import FORMATS, parse_formats, write_pack

__all__ = ["FORMATS", "ReportInputs", "ReportPack", "build_pack", "parse_formats", "write_pack"]
