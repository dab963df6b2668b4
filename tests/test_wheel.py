"""What users install: the wheel, in a fresh virtual environment, run outside the repository.

The rest of the suite runs on the editable install, which reads templates and defaults from
the checkout and so cannot notice a file missing from the wheel. Here the sdist and the wheel
are built the way ``pip install .`` builds them (PEP 517, isolated; the wheel from the sdist,
so both must hold the package data), the wheel goes into a plain venv (no system site-packages:
the editable install's finder would shadow it), and a copy of ``examples/saas-three-clients``
in a temporary folder runs ``allocate`` and ``report --format html,pdf,md``.

The venv gets the wheel alone (``--no-deps``, by the outer pip: the venv has none, which saves
ensurepip's minute); its dependencies then come from the test interpreter's site-packages,
added as plain paths (``.pth`` lines: that folder's own ``.pth`` files, the editable
install's finder among them, are not run, so ``tenantcost`` still resolves to the wheel).
Installing a dozen dependencies that the suite's interpreter already has took three minutes
on a loaded 2-core machine and checked only pip; instead, every requirement the wheel
declares is checked against the versions the venv imports. About a minute, most of it the
two isolated builds.

The tests on the installed wheel are marked ``slow``. The loader chain (a user's partial
``--templates`` folder over the package's) is checked here too, on the source tree (fast) and
on the installed package.
"""

from __future__ import annotations

import os
import shutil
import site
import subprocess
import sys
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

import jinja2
import pytest

from tenantcost.report.render import environment

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "saas-three-clients"
TEMPLATES = ROOT / "tenantcost" / "templates"
PACKAGE_DATA = [
    *(f"tenantcost/templates/{p.name}" for p in sorted(TEMPLATES.iterdir()) if p.is_file()),
    "tenantcost/config/defaults.yaml",
    "tenantcost/store/migrations/env.py",
    *(f"tenantcost/store/migrations/versions/{p.name}"
      for p in sorted((ROOT / "tenantcost/store/migrations/versions").glob("*.py"))),
]  # fmt: skip


SITE = [*site.getsitepackages(), *([site.getusersitepackages()] if site.ENABLE_USER_SITE else [])]
"""Where the test interpreter's packages are: the installed wheel's dependencies come from here."""
PURELIB = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
UNMET = """
from importlib.metadata import distribution, version
from packaging.requirements import Requirement
for text in distribution("tenantcost").requires or []:
    need = Requirement(text)
    if need.marker is None or need.marker.evaluate({"extra": ""}):
        if not need.specifier.contains(version(need.name), prereleases=True):
            print(text, "but", version(need.name))
"""
"""Each requirement of the installed wheel (extras aside) the venv's packages do not meet."""


@dataclass(frozen=True)
class Installed:
    """The built distributions and the venv holding the installed wheel."""

    wheel: Path
    sdist: Path
    venv: Path

    def bin(self, name: str) -> Path:
        return self.venv / ("Scripts" if os.name == "nt" else "bin") / name


def _run(args: list[str | Path], cwd: Path, timeout: int = 300) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    done = subprocess.run(
        [str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )
    assert done.returncode == 0, f"{args} failed ({done.returncode}):\n{done.stderr[-3000:]}"
    return done


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    base = tmp_path_factory.mktemp("wheel")
    # Build from a copy: a build writes build/ and *.egg-info next to its sources, and other
    # test runs may share this checkout.
    src = base / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, src / name)
    shutil.copytree(
        ROOT / "tenantcost", src / "tenantcost", ignore=shutil.ignore_patterns("__pycache__")
    )
    dist = base / "dist"
    _run([sys.executable, "-m", "build", "--outdir", dist, src], cwd=base)
    venv = base / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", venv], cwd=base)
    wheel = next(dist.glob("tenantcost-*.whl"))
    result = Installed(wheel, next(dist.glob("tenantcost-*.tar.gz")), venv)
    _run([sys.executable, "-m", "pip", "--python", result.bin("python"), "install", "--quiet",
          "--no-compile", "--no-deps", wheel], cwd=base, timeout=600)  # fmt: skip
    purelib = _run([result.bin("python"), "-c", PURELIB], cwd=base).stdout.strip()
    (Path(purelib) / "suite-dependencies.pth").write_text("".join(f"{p}\n" for p in SITE))
    return result


@pytest.fixture(scope="module")
def example_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example in a folder outside the repository (so nothing resolves to the checkout)."""
    folder = tmp_path_factory.mktemp("user") / "saas-three-clients"
    shutil.copytree(EXAMPLE, folder)
    assert ROOT not in folder.parents
    return folder


@pytest.mark.slow
def test_wheel_and_sdist_ship_templates_and_defaults(installed: Installed):
    with zipfile.ZipFile(installed.wheel) as wheel:
        names = set(wheel.namelist())
        assert set(PACKAGE_DATA) <= names
        shipped = wheel.read("tenantcost/config/defaults.yaml").decode()
    assert shipped == (ROOT / "config" / "defaults.yaml").read_text()  # the link's target
    with tarfile.open(installed.sdist) as sdist:
        top = sdist.getnames()[0].split("/")[0]
        members = {m.name.removeprefix(f"{top}/"): m for m in sdist.getmembers()}
    for name in PACKAGE_DATA:
        assert name in members and members[name].isfile(), name


@pytest.mark.slow
def test_the_venv_runs_the_installed_wheel(installed: Installed, example_copy: Path):
    done = _run([installed.bin("python"), "-c", "import tenantcost; print(tenantcost.__file__)"],
                cwd=example_copy)  # fmt: skip
    location = Path(done.stdout.strip()).resolve()
    assert installed.venv.resolve() in location.parents, location
    assert ROOT not in location.parents
    unmet = _run([installed.bin("python"), "-c", UNMET], cwd=example_copy)
    assert unmet.stdout == "", unmet.stdout  # a missing dependency raises: PackageNotFoundError


@pytest.mark.slow
def test_allocate_from_the_installed_wheel(installed: Installed, example_copy: Path):
    done = _run([installed.bin("tenantcost"), "allocate", "--config", "rules.yaml"],
                cwd=example_copy)  # fmt: skip
    # docs/method.md's worked example / tests/golden/saas-three-clients.json, to the micro-unit.
    for figure in ("0.123458", "0.077173", "0.001569", "0.202200", "0.643440"):
        assert figure in done.stdout, figure


@pytest.mark.slow
def test_report_from_the_installed_wheel(installed: Installed, example_copy: Path):
    args = ["report", "--config", "rules.yaml", "--out", "pack", "--format", "html,pdf,md"]
    _run([installed.bin("tenantcost"), *args], cwd=example_copy)
    pack = example_copy / "pack"
    for stem in ("finance-summary", "clients/client-a", "clients/client-b", "clients/client-c"):
        html = (pack / f"{stem}.html").read_text()
        assert "<style>" in html and "</html>" in html  # report.css inlined from package data
        assert (pack / f"{stem}.pdf").read_bytes().startswith(b"%PDF-")
        assert (pack / f"{stem}.md").stat().st_size > 0
    assert (pack / "clients" / "client-a.md").read_text().startswith("# Cost sheet: client-a\n")
    # client-a as the summary and index read it (one rounding: every page reads the same figure)
    assert "| **Total** | **0.1234 USD** |" in (pack / "clients" / "client-a.md").read_text()
    assert (pack / "index.html").is_file()


@pytest.mark.slow
def test_the_store_from_the_installed_wheel(installed: Installed, example_copy: Path):
    """The migrations ship as package data: `db upgrade` creates a store, `rules load`,
    `ingest` fill it, `run` allocates from it and records the run."""
    store = f"sqlite:///{example_copy / 'store' / 'tc.db'}"
    (example_copy / "store").mkdir()
    done = _run([installed.bin("tenantcost"), "db", "upgrade", "--db", store], cwd=example_copy)
    head = max(p.name[:4] for p in (ROOT / "tenantcost/store/migrations/versions").glob("0*.py"))
    assert done.stdout.endswith(f"schema upgraded from (empty) to revision {head}\n"), done.stdout
    done = _run([installed.bin("tenantcost"), "rules", "load", "rules.yaml", "--db", store],
                cwd=example_copy)  # fmt: skip
    assert "new rule versions: saas-2026-11" in done.stdout
    done = _run([installed.bin("tenantcost"), "ingest", "usage", "--usage", "usage.csv",
                 "--db", store], cwd=example_copy)  # fmt: skip
    assert " committed (replace): 6 rows" in done.stdout
    assert len(list((example_copy / "store" / "tenantcost-data" / "usage").rglob("*.parquet"))) == 1
    done = _run([installed.bin("tenantcost"), "ingest", "costs", "--costs", "costs.json",
                 "--db", store], cwd=example_copy)  # fmt: skip
    done = _run([installed.bin("tenantcost"), "run", "--month", "2026-11", "--format", "json",
                 "--db", store], cwd=example_copy)  # fmt: skip
    assert '"run_id": ' in done.stdout and '"gap": 0' in done.stdout


@pytest.mark.slow
def test_a_partial_template_folder_overrides_the_installed_package(
    installed: Installed, example_copy: Path
):
    brand = example_copy / "brand"
    brand.mkdir()
    (brand / "base.html").write_text(
        '{% extends "tenantcost/base.html" %}{% block brand %}ACME Cloud Billing{% endblock %}'
    )
    args = ["report", "--config", "rules.yaml", "--out", "branded", "--format", "html"]
    _run([installed.bin("tenantcost"), *args, "--templates", "brand"], cwd=example_copy)
    page = (example_copy / "branded" / "clients" / "client-b.html").read_text()
    assert "ACME Cloud Billing" in page
    assert 'id="lines-table"' in page  # the sheet itself still comes from the package


# --------------------------------------------------------------------------- the loader chain


def test_user_templates_come_first_file_by_file(tmp_path: Path):
    (tmp_path / "report.css").write_text("/* brand */")
    env = environment("html", tmp_path)
    assert env.get_template("report.css").render() == "/* brand */"
    assert "{% extends" in env.loader.get_source(env, "client_sheet.html")[0]  # type: ignore[union-attr]
    package_css = (TEMPLATES / "report.css").read_text()
    assert env.get_template("tenantcost/report.css").render().strip() == package_css.strip()


def test_package_templates_need_no_checkout_path():
    env = environment("md", None)
    source, filename, _ = env.loader.get_source(env, "client_sheet.md")  # type: ignore[union-attr]
    assert source == (TEMPLATES / "client_sheet.md").read_text()
    assert filename is not None and Path(filename).parent.name == "templates"
    with pytest.raises(jinja2.TemplateNotFound):
        env.get_template("no_such_template.md")


def test_the_top_level_templates_folder_is_the_package_folder():
    link = ROOT / "templates"
    assert link.is_symlink() and link.resolve() == TEMPLATES.resolve()
