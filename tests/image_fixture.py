"""The service's image (the repository's ``Dockerfile``), built and run with podman.

No image registry is reachable from the test machines, so the ``BASE`` the Dockerfile takes is
built from Debian's packages: ``mmdebstrap`` makes a minimal bookworm with ``python3``,
``python3-venv`` and ``ca-certificates`` (this machine's extra CA certificates added, so pip
and apt in the build trust the network's TLS), ``podman import`` turns the tar into an image.
The tar takes 20 to 30 s; it is kept in the temporary folder under a name that hashes the
command and the certificates, so later runs on the same machine import it again (or find the
image already there). The build (the wheel of this checkout and its dependencies into a venv,
WeasyPrint's libraries with apt) takes about 65 s on a 2-core machine with a fast network;
podman's cache makes a rebuild take about 7 s for an unchanged checkout and about 25 s when
only the code changed (the dependencies' layer is reused). A first run of tests/test_image.py
takes about 2 minutes, a second one about 30 s.

Podman runs with ``--runtime runc`` and a containers.conf of its own (``CONTAINERS_CONF``): no
default ulimits (these machines refuse ``setrlimit``) and the cgroupfs cgroup manager. A
missing podman, runc or mmdebstrap FAILS the tests with the command that installs them (the
README's test command, ``bash scripts/test.sh``, does); nothing is skipped.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TOOLS = {"podman": "podman", "runc": "runc", "mmdebstrap": "mmdebstrap"}
"""Commands the image tests run, by the Debian package that installs each."""
INSTALL_HINT = (
    "run the README's test command, `bash scripts/test.sh`, which installs the Debian packages "
    "podman, runc and mmdebstrap"
)
EXTRA_CA = Path("/usr/local/share/ca-certificates")
BASE_COMMAND = [
    "mmdebstrap", "--variant=minbase", "--include=python3,python3-venv,ca-certificates",
    "--format=tar",
    f"--customize-hook=sync-in {EXTRA_CA} {EXTRA_CA}",
    '--customize-hook=chroot "$1" update-ca-certificates',
    "bookworm",
]  # fmt: skip
"""The base image's root filesystem (the output file is appended)."""
BASE_REPOSITORY = "localhost/tenantcost-test-base"
IMAGE_TAG = "localhost/tenantcost:test"
BUILD_STAGE_TAG = "localhost/tenantcost:test-build-stage"
TEST_LABEL = "org.tenantcost.test-build=1"
"""On every image the tests build (each step's cache image too): what they prune."""
SYSTEM_CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"
"""The base's CA bundle (the extra certificates included): pip's, in the build stage."""
CONTAINERS_CONF = """\
[containers]
default_ulimits = []
[engine]
cgroup_manager = "cgroupfs"
runtime = "runc"
"""
HARDENED = [
    "--network", "host", "--read-only", "--tmpfs", "/tmp", "--user", "10001",
    "--cap-drop", "ALL", "--security-opt", "no-new-privileges", "--http-proxy=false",
]  # fmt: skip
"""How the tests run the image: as Kubernetes would with the chart's securityContext (a
read-only root, /tmp an empty writable folder, uid 10001, no capabilities), on the host's
network so that it reaches PostgreSQL and the test servers on 127.0.0.1."""


def require_tools() -> None:
    missing = [package for command, package in TOOLS.items() if shutil.which(command) is None]
    if missing:
        pytest.fail(f"missing {', '.join(missing)}: {INSTALL_HINT}", pytrace=False)


@dataclass
class Podman:
    """podman with this machine's settings (a containers.conf of its own, runc)."""

    conf: Path
    timings: dict[str, float] = field(default_factory=dict)

    @classmethod
    def in_folder(cls, folder: Path) -> Podman:
        conf = folder / "containers.conf"
        conf.write_text(CONTAINERS_CONF)
        return cls(conf)

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, "CONTAINERS_CONF": str(self.conf)}

    def __call__(
        self, *args: str, timeout: float = 300, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        command = ["podman", "--runtime", "runc", *args]
        done = subprocess.run(command, env=self.env, capture_output=True, text=True,
                              stdin=subprocess.DEVNULL, timeout=timeout, check=False)  # fmt: skip
        if check and done.returncode != 0:
            pytest.fail(
                f"`{' '.join(command[:8])} ...` failed ({done.returncode}):\n"
                f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}",
                pytrace=False,
            )
        return done

    def timed(self, what: str, started: float) -> None:
        self.timings[what] = time.monotonic() - started
        print(f"image test: {what} took {self.timings[what]:.1f} s", file=sys.stderr)

    def base_image(self) -> str:
        """The Debian base as an image (tag: the hash of its tar's recipe)."""
        key = base_key()
        tag = f"{BASE_REPOSITORY}:{key}"
        if self("image", "exists", tag, check=False).returncode == 0:
            return tag
        tar = base_tar(key, self)
        started = time.monotonic()
        self("import", str(tar), tag, timeout=600)
        self.timed("base import", started)
        return tag

    def build(self, base: str, folder: Path) -> str:
        """Build the Dockerfile on this checkout; returns the image's id.

        podman keeps each step's result as a cache image. The build stage is tagged too, so
        that pruning the untagged images of earlier builds (each holding a copy of the venv,
        about 650 MB) leaves the current build's cache whole."""
        iid = folder / "image.id"
        args = [
            "build",
            "--pull=never",
            "--network",
            "host",
            "--label",
            TEST_LABEL,
            "--build-arg",
            f"BASE={base}",
            "--build-arg",
            f"PIP_CERT={SYSTEM_CA_BUNDLE}",
        ]
        for name, value in pip_index_settings().items():
            args += ["--build-arg", f"{name}={value}"]
        started = time.monotonic()
        self(*args, "--target", "build", "--tag", BUILD_STAGE_TAG, str(ROOT), timeout=1500)
        self(*args, "--iidfile", str(iid), "--tag", IMAGE_TAG, str(ROOT), timeout=1500)
        self.timed("image build", started)
        self("image", "prune", "--force", "--filter", f"label={TEST_LABEL}", check=False)
        return iid.read_text().strip()

    def inspect(self, image: str) -> dict:
        return json.loads(self("image", "inspect", image).stdout)[0]

    def run(
        self,
        image: str,
        *command: str,
        options: Sequence[str] = (),
        timeout: float = 300,
    ) -> subprocess.CompletedProcess[str]:
        """``podman run --rm`` hardened (:data:`HARDENED`); the exit status is the caller's."""
        return self("run", "--rm", *HARDENED, *options, image, *command, timeout=timeout,
                    check=False)  # fmt: skip


def base_key() -> str:
    """What the base tar depends on: its command and the extra CA certificates it copies."""
    digest = hashlib.sha256(json.dumps(BASE_COMMAND).encode())
    for path in sorted(EXTRA_CA.rglob("*")) if EXTRA_CA.is_dir() else []:
        if path.is_file():
            digest.update(str(path.relative_to(EXTRA_CA)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def base_tar(key: str, podman: Podman) -> Path:
    """The base's tar, built once per machine (and recipe) in the temporary folder."""
    tar = Path(tempfile.gettempdir()) / f"tenantcost-image-base-{key}.tar"
    if tar.exists():
        return tar
    partial = tar.with_name(f"{tar.name}.{os.getpid()}.partial")
    started = time.monotonic()
    done = subprocess.run([*BASE_COMMAND, str(partial)], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=900, check=False)  # fmt: skip
    if done.returncode != 0:
        partial.unlink(missing_ok=True)
        pytest.fail(f"mmdebstrap failed ({done.returncode}):\n{done.stderr[-3000:]}",
                    pytrace=False)  # fmt: skip
    os.replace(partial, tar)  # whole, or not there: a concurrent run builds its own
    podman.timed("base tar (mmdebstrap)", started)
    return tar


def pip_index_settings() -> dict[str, str]:
    """This machine's pip index settings that a build container can reach (http/https; a
    ``file://`` index on this disk is not in the container), as the Dockerfile's build
    arguments. The later setting wins, as in pip (the environment's last)."""
    done = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True,
                          text=True, timeout=60, check=False)  # fmt: skip
    found: dict[str, str] = {}
    for line in done.stdout.splitlines():
        key, _, value = line.partition("=")
        name = key.rsplit(".", 1)[-1]
        if name in ("index-url", "extra-index-url"):
            urls = [u for u in value.strip("'\"").split() if u.startswith(("http://", "https://"))]
            arg = "PIP_" + name.upper().replace("-", "_")
            if urls:
                found[arg] = " ".join(urls)
            else:
                found.pop(arg, None)
    return found
