"""docs/meter.md's tutorial ("Try it on a laptop") is pasted as written and does what it shows.

As tests/test_readme.py does for the README: the page's shell blocks run for real, in order,
in one bash in a temporary folder (the repository's ``examples/`` linked in), with a real
``tenantcost serve``, and the outputs the page prints are compared with what the commands
printed. Two departures, both for running beside other tests: the server listens on a free
port instead of 8000 (the page's ``127.0.0.1:8000`` is rewritten), and the install block is
not run (this environment has both distributions; tests/test_meter_wheel.py builds and
installs ``./meter`` in a plain venv), only checked to be the two lines a new user needs.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .postgres_fixture import free_port

ROOT = Path(__file__).resolve().parents[1]
PAGE = (ROOT / "docs" / "meter.md").read_text(encoding="utf-8")
TUTORIAL = PAGE.split("## Try it on a laptop\n", 1)[1].split("\n## ", 1)[0]
BLOCKS = re.findall(r"```(sh|console)\n(.*?)```", TUTORIAL, flags=re.S)


def test_the_readme_says_how_to_install_the_meter() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "`pip install ./meter`" in readme and "](docs/meter.md)" in readme
    assert "```sh\npip install ./meter\n```" in PAGE  # the page's Install section


def _script(port: int) -> tuple[str, list[str]]:
    """The tutorial as one bash script on ``port``, and each console block's shown output;
    console block N writes its command's stdout to ``shown-N.out``."""
    kinds = [kind for kind, _ in BLOCKS]
    assert kinds[0] == "sh" and BLOCKS[0][1] == (
        "python3 -m venv .venv && . .venv/bin/activate\npip install -e . ./meter\n"
    )
    lines = ["set -e", "trap 'kill $(jobs -p) 2>/dev/null || true' EXIT"]
    shown = []
    for kind, text in BLOCKS[1:]:
        if kind == "sh":
            lines.append(text)
            continue
        command, _, output = text.partition("\n")
        assert command.startswith("$ ")
        lines.append(f"{command[2:]} > shown-{len(shown)}.out")
        shown.append(output)
    script = "\n".join(lines)
    assert "tenantcost serve &" in script and "127.0.0.1:8000" in script
    script = script.replace("tenantcost serve &", f"tenantcost serve --port {port} &")
    return script.replace("127.0.0.1:8000", f"127.0.0.1:{port}"), shown


def _fields(text: str) -> list[list[str]]:
    return [line.split() for line in text.splitlines() if line.strip()]


@pytest.mark.slow
def test_the_tutorial_runs_as_written_and_prints_what_it_shows(tmp_path: Path) -> None:
    script, shown = _script(free_port())
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    env = {k: v for k, v in os.environ.items() if not k.startswith("TENANTCOST_")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    month = time.strftime("%Y-%m", time.gmtime())
    done = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=180)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "token 'api-meter' (ingest) created" in done.stderr
    delivered, usage = (tmp_path / f"shown-{n}.out" for n in range(2))
    assert len(shown) == 2 and delivered.read_text() == shown[0] == "delivered: True\n"
    # the month and CPU seconds are this run's; every other field as shown
    got, expected = _fields(usage.read_text()), _fields(shown[1])
    assert got[:2] == expected[:2] and len(got) == len(expected), got
    for row, shown_row in zip(got[2:], expected[2:], strict=True):
        assert row[0] == month and float(row[-1]) > 0, row
        assert row[1:-1] == shown_row[1:-1], (row, shown_row)
    assert not list((tmp_path / "meter-spool").glob("*.json"))  # nothing left to deliver
