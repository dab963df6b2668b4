# The service's image: `tenantcost serve` by default, and every other command (the CronJobs'
# `ingest --since-last`, `run --month`, `watch`, `db upgrade`) with another CMD.
#
#   podman build -t tenantcost .        (or docker build; --build-arg BASE=... picks another
#                                        Debian-like base, EXTRAS=s3,gcs,azure the extras)
#   podman run --read-only --tmpfs /tmp -e TENANTCOST_DB=... -e TENANTCOST_SECRET=... \
#       -p 8000:8000 tenantcost
#
# Two stages: the build stage makes the wheel of this checkout and installs it with its
# dependencies into the venv /opt/tenantcost; the final stage gets that venv alone (no
# source tree, no wheel, no pip, no cache, no compiler) and the system libraries WeasyPrint
# loads at run time. Runs as uid 10001 and on a read-only root filesystem: it writes only to
# /tmp (temporary files, HOME, fontconfig's cache) and to the store: its data directory
# (TENANTCOST_DATA) and, with SQLite, its database file (by default both in the working
# directory /var/lib/tenantcost, a volume). Rendered PDFs are kept in the store's database,
# not on disk. charts/tenantcost runs it; tests/test_image.py builds and runs it.
ARG BASE=python:3.12-slim

FROM ${BASE} AS build
# The package's extras to install, comma-separated: s3 (s3:// data directories and billing
# exports, s3fs); gcs and azure for gs:// and az://; empty for none.
ARG EXTRAS=s3
# pip's settings for this stage only (none reach the final image): an index mirror, and a CA
# bundle when the network's TLS needs one (e.g. /etc/ssl/certs/ca-certificates.crt of a base
# whose system store trusts it).
ARG PIP_INDEX_URL
ARG PIP_EXTRA_INDEX_URL
ARG PIP_CERT
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DEFAULT_TIMEOUT=120 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
# The dependencies (and the extras') first, from pyproject.toml alone: a layer that a change
# of the code alone leaves valid (a rebuild after a change of the code then skips the
# dependencies' download and installation, most of a build's time).
COPY pyproject.toml ./
RUN set -eu; \
    [ -n "${PIP_INDEX_URL:-}" ] || unset PIP_INDEX_URL; \
    [ -n "${PIP_EXTRA_INDEX_URL:-}" ] || unset PIP_EXTRA_INDEX_URL; \
    [ -n "${PIP_CERT:-}" ] || unset PIP_CERT; \
    python3 -m venv /opt/tenantcost; \
    python3 -c 'import os, tomllib; \
        project = tomllib.load(open("pyproject.toml", "rb"))["project"]; \
        extras = [e.strip() for e in os.environ["EXTRAS"].split(",") if e.strip()]; \
        optional = [r for e in extras for r in project["optional-dependencies"][e]]; \
        print("\n".join(project["dependencies"] + optional))' > /tmp/requirements.txt; \
    /opt/tenantcost/bin/python -m pip install --quiet --requirement /tmp/requirements.txt
# Then the wheel of this checkout, installed as users install it (its requirements resolved
# again: already met), and pip removed from the venv.
COPY README.md ./
COPY tenantcost ./tenantcost
RUN set -eu; \
    [ -n "${PIP_INDEX_URL:-}" ] || unset PIP_INDEX_URL; \
    [ -n "${PIP_EXTRA_INDEX_URL:-}" ] || unset PIP_EXTRA_INDEX_URL; \
    [ -n "${PIP_CERT:-}" ] || unset PIP_CERT; \
    /opt/tenantcost/bin/python -m pip wheel --quiet --no-deps --wheel-dir /wheels .; \
    wheel=$(echo /wheels/tenantcost-*.whl); \
    /opt/tenantcost/bin/python -m pip install --quiet "$wheel${EXTRAS:+[$EXTRAS]}"; \
    /opt/tenantcost/bin/python -m pip uninstall --quiet --yes pip

FROM ${BASE}
# WeasyPrint's libraries (Pango with its FreeType/fontconfig backend, HarfBuzz and its
# subsetter) and the fonts the report's CSS names first (Liberation Sans for text, DejaVu Sans
# Mono for code; the package ships none): installed with apt on a Debian base; another base
# must already have them (the check below fails the build without the libraries).
RUN set -eu; \
    if command -v apt-get >/dev/null; then \
        apt-get update -qq; \
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
            libpango-1.0-0 libpangoft2-1.0-0 libharfbuzz-subset0 fonts-liberation \
            fonts-dejavu-core >/dev/null; \
        apt-get clean; \
        rm -rf /var/lib/apt/lists/* /var/cache/debconf/*-old /var/log/apt /var/log/dpkg.log; \
    fi; \
    useradd --uid 10001 --user-group --no-create-home --home-dir /tmp \
        --shell /usr/sbin/nologin tenantcost; \
    mkdir -p /var/lib/tenantcost; \
    chown 10001:10001 /var/lib/tenantcost
COPY --from=build /opt/tenantcost /opt/tenantcost
ENV PATH=/opt/tenantcost/bin:$PATH \
    HOME=/tmp \
    XDG_CACHE_HOME=/tmp/.cache \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
RUN python -c "import weasyprint, tenantcost.cli" && tenantcost --version
# The default store (sqlite:///tenantcost.db and tenantcost-data/ in the working directory)
# lands in the volume; a PostgreSQL store names its data directory (TENANTCOST_DATA: a folder
# on a shared volume, e.g. /var/lib/tenantcost/data, or an fsspec URL such as s3://bucket/tc/).
WORKDIR /var/lib/tenantcost
VOLUME ["/var/lib/tenantcost"]
USER 10001:10001
# 8000: the API and the pages; 9090: /metrics (serve --metrics-port 9090).
EXPOSE 8000 9090
ENTRYPOINT ["tenantcost"]
CMD ["serve", "--host", "0.0.0.0", "--port", "8000"]
