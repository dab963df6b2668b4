"""The docs' screenshots are the ones ``scripts/screenshots.py`` makes, for the demo's readers.

Not a pixel comparison (fonts and antialiasing differ between machines): the script's shots
are one per token the demo prints (:func:`tenantcost.service.demo.demo_token_specs`) and
viewport; docs/service.md shows exactly those files, each a PNG of its viewport's size in
``docs/img``, and all of them together stay small enough for the docs site.
"""

from __future__ import annotations

import importlib.util
import re
import struct
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "screenshots.py"
DOCS = ROOT / "docs" / "service.md"
MAX_BYTES = 1_500_000


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("screenshots_script", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_the_docs_show_the_scripts_shots_of_every_reader_the_demo_prints():
    import pandas as pd

    from tenantcost.service.demo import demo_token_specs
    from tenantcost.service.demo_company import DEFAULT_SEED, make_company

    shots = _script()
    assert shots.SEED == DEFAULT_SEED
    company = make_company(shots.SEED, pd.Timestamp(shots.NOW))
    assert tuple(demo_token_specs(company)) == shots.ROLES
    names = {shot.name for shot in shots.SHOTS}
    assert len(names) == len(shots.ROLES) * len(shots.SCREENS)
    text = DOCS.read_text(encoding="utf-8")
    shown = re.findall(r"\]\(img/(first-screen-[^)]+\.png)\)", text)
    assert sorted(shown) == sorted(names), "docs/service.md and scripts/screenshots.py differ"
    total = 0
    for shot in shots.SHOTS:
        data = (ROOT / "docs" / "img" / shot.name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n", shot.name
        width, height = struct.unpack(">II", data[16:24])  # the IHDR chunk
        assert (width, height) == (shot.width, shot.height), shot.name
        total += len(data)
    assert total < MAX_BYTES, f"the screenshots take {total} bytes"
