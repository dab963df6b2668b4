"""The FinOps Foundation's ``focus-validator`` (PyPI), in its own Python 3.12 virtual environment.

Its 2.x releases need Python >= 3.12 and pin numpy < 2 (so pyarrow < 17), which the project's
own environment does not satisfy: the venv lives under /tmp, one folder per validator version,
created once (``scripts/test.sh`` creates it ahead of the suite; a rerun reuses it). The
validator reads ``focus_validator/rules/currency_codes.csv`` relative to the working directory,
so it runs from its own site-packages folder, offline (``--block-download``: the bundled FOCUS
1.2 rules). Its exit code is 0 even when rules fail, so the summary and failure lines are read.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

VERSION = "2.2.1"
VENV = Path(
    os.environ.get("TENANTCOST_FOCUS_VALIDATOR_VENV", f"/tmp/tenantcost-focus-validator-{VERSION}")
)
READY = VENV / ".ready"
SUMMARY = re.compile(r"Total: (\d+) \| Pass: (\d+) \| Fail: (\d+) \| Skipped: (\d+)")
FAILURE = re.compile(r"^- ([A-Za-z]+-[A-Z]-\d{3}-[MCO]): violations=(\d+)", re.MULTILINE)


def python312() -> str | None:
    """A Python 3.12 interpreter that runs: pyenv's (its PATH shim may point elsewhere), or
    ``python3.12`` on PATH."""
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    candidates = [str(p) for p in sorted(pyenv.glob("3.12*/bin/python3.12"))]
    candidates += [p for p in [shutil.which("python3.12")] if p]
    for candidate in candidates:
        done = subprocess.run([candidate, "--version"], capture_output=True, text=True)
        if done.returncode == 0:
            return candidate
    return None


def ensure_venv() -> Path:
    """The validator's venv, created and installed once (a ``.ready`` marker records success)."""
    if READY.exists():
        return VENV
    interpreter = python312()
    if interpreter is None:
        raise RuntimeError("focus-validator needs Python 3.12 (python3.12 or pyenv 3.12.x)")
    subprocess.run([interpreter, "-m", "venv", "--clear", str(VENV)], check=True)
    subprocess.run(
        [
            str(VENV / "bin" / "python"), "-m", "pip", "install", "--quiet",
            "--disable-pip-version-check", f"focus-validator=={VERSION}", "numpy<2", "pyarrow<17",
        ],
        check=True,
        timeout=600,
    )  # fmt: skip
    READY.write_text(VERSION + "\n")
    return VENV


@dataclass(frozen=True)
class Report:
    """The validator's verdict: the summary counts and the failing rule ids."""

    total: int
    passed: int
    failed: int
    skipped: int
    failures: dict[str, int]
    summary_line: str
    output: str

    @property
    def failed_mandatory(self) -> list[str]:
        return sorted(r for r in self.failures if r.endswith("-M"))


def validate(venv: Path, data_file: Path, version: str = "1.2") -> Report:
    """Run the validator on ``data_file`` offline and parse its console report."""
    python = venv / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import focus_validator, os; "
         "print(os.path.dirname(os.path.dirname(focus_validator.__file__)))"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    done = subprocess.run(
        [str(venv / "bin" / "focus-validator"), "--data-file", str(data_file.resolve()),
         "--validate-version", version, "--block-download"],
        capture_output=True, text=True, cwd=site, timeout=300,
    )  # fmt: skip
    output = done.stdout + done.stderr
    match = SUMMARY.search(output)
    if match is None:
        raise AssertionError(f"no summary line in the validator's output:\n{output}")
    total, passed, failed, skipped = (int(g) for g in match.groups())
    failures = {rule: int(n) for rule, n in FAILURE.findall(output)}
    return Report(total, passed, failed, skipped, failures, match.group(0), output)


if __name__ == "__main__":  # scripts/test.sh: create the venv before the suite
    print(ensure_venv(), file=sys.stderr)
