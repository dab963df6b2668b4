"""Where a sheet's figures come from: input fingerprints, rules, version and generation time.

A figure that cannot be reproduced cannot be defended. Each page therefore names the exact
inputs (a SHA-256 of every input file, the rule file included), the rule versions in force,
the tenantcost version and when it was produced, so anyone can re-run the same command on the
same files and check that the fingerprints and figures match.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from urllib.parse import urlsplit

from tenantcost import __version__
from tenantcost.config.rules import RuleVersion
from tenantcost.timefmt import iso_z_seconds
from tenantcost.usage_source import is_url

SHORT_HASH = 12
"""Hex digits of a fingerprint shown on a page (the full digest is kept in the HTML title)."""


@dataclass(frozen=True)
class InputFile:
    """One input and its SHA-256 (of the file, or of a folder's files and relative names)."""

    role: str
    path: str
    sha256: str

    @property
    def short(self) -> str:
        return self.sha256[:SHORT_HASH] if self.sha256 != REMOTE else REMOTE


@dataclass(frozen=True)
class Provenance:
    """Everything needed to reproduce a report."""

    inputs: list[InputFile]
    rules: list[tuple[str, str]]
    """(rule id, effective date) of each version in force in the period."""
    version: str
    generated_at: str
    """UTC, ISO 8601 to the second, with a ``Z``."""


REMOTE = "remote URL, not fingerprinted"


DIRECTORIES = re.compile(r"(?:[A-Za-z]:)?[^\s:()\\/]*[\\/](?:[^\\/\n]*[\\/])*")
"""A path's directories: from the start of a path to its last separator (spaces allowed)."""


def _url_name(token: str) -> str:
    if not is_url(token):
        return token
    parts = urlsplit(token)
    last = PurePosixPath(parts.path).name
    return f"{parts.hostname or ''}{'/…/' + last if last else ''}"


def input_name(source: str) -> str:
    """An input as a client may read it: every path in the text by its name without
    directories (a server's or an operator's folders are nobody else's business, and the
    fingerprint identifies the file); a URL keeps its host and last path segment, never
    credentials or a query. ``stored rule file /srv/x/rules.yaml`` reads ``stored rule file
    rules.yaml``, ``batch 2: /tmp/a/costs.json`` reads ``batch 2: costs.json``."""
    text = "".join(_url_name(token) for token in re.split(r"(\s+)", str(source)))
    if "://" in str(source):
        return text  # the URLs are names already (host/…/last)
    return DIRECTORIES.sub("", text) or text


def client_facing(provenance: Provenance, redact: Callable[[str], str]) -> Provenance:
    """The provenance of a page a client may receive: input names without directories,
    redacted for the reader."""
    return Provenance(
        inputs=[InputFile(f.role, redact(input_name(f.path)), f.sha256) for f in provenance.inputs],
        rules=[(redact(i), d) for i, d in provenance.rules],
        version=provenance.version,
        generated_at=provenance.generated_at,
    )


def fingerprint(path: Path) -> str:
    """SHA-256 of a file; for a folder, of each file's relative name and content, sorted."""
    digest = hashlib.sha256()
    if path.is_dir():
        for file in sorted(p for p in path.rglob("*") if p.is_file()):
            digest.update(file.relative_to(path).as_posix().encode() + b"\0")
            digest.update(hashlib.sha256(file.read_bytes()).digest())
        return digest.hexdigest()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def generation_time() -> datetime:
    """Now in UTC, or ``SOURCE_DATE_EPOCH`` when set (reproducible builds convention)."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH", "").strip()
    if epoch.isdigit():
        return datetime.fromtimestamp(int(epoch), tz=UTC)
    return datetime.now(tz=UTC).replace(microsecond=0)


def collect(
    config: Path,
    cost_paths: Sequence[Path],
    usage_paths: Sequence[Path | str],
    rules: Sequence[RuleVersion],
    at: datetime | None = None,
) -> Provenance:
    """Fingerprint every input and record the rules in force, the version and the time."""
    roles: list[tuple[str, Path | str]] = [("rules", config)]
    roles += [("costs", Path(p)) for p in cost_paths]
    roles += [("usage", p if is_url(p) else Path(p)) for p in usage_paths]
    when = (at or generation_time()).astimezone(UTC)
    return Provenance(
        inputs=[
            InputFile(role, str(path), REMOTE if is_url(path) else fingerprint(Path(path)))
            for role, path in roles
        ],
        rules=[(r.id, r.effective_from.date().isoformat()) for r in rules],
        version=__version__,
        generated_at=iso_z_seconds(when),
    )
