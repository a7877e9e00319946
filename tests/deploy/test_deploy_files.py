"""The recipes under ``deploy/`` kept honest without a container engine.

Every file parses; every ``jobhost`` command line they run exists with those flags; every
``JOBHOST_*`` variable they set is a setting the host knows (and its value passes validation);
every ``OTEL_*`` variable is one the OpenTelemetry SDK defines; every probe path is served; every
stop timeout outlasts the shutdown grace. One test starts ``jobhost run`` with exactly the
environment compose gives a replica, pointed at the local PostgreSQL, and gets 200 from the probe
paths the manifests use.
"""

from __future__ import annotations

import configparser
import importlib
import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import tomllib
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from datetime import timedelta
from functools import cache
from pathlib import Path
from typing import Any

import click
import opentelemetry.environment_variables as otel_api_variables
import opentelemetry.sdk.environment_variables as otel_sdk_variables
import pytest
from jobhost_contracts import parse_duration
from jobhost_http import plugin as http_plugin
from sqlalchemy.engine import make_url

from jobhost.builtin import retention
from jobhost.cli import cli
from jobhost.cli._app import _register_commands
from jobhost.config import Settings, load_settings
from tests.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
DOCKERFILE = DEPLOY / "container" / "Dockerfile"
COMPOSE = DEPLOY / "compose" / "compose.yaml"
SYSTEMD_UNIT = DEPLOY / "systemd" / "jobhost.service"
SYSTEMD_ENV = DEPLOY / "systemd" / "jobhost.env.example"
KUBERNETES = DEPLOY / "kubernetes"
COLLECTOR = DEPLOY / "otel-collector" / "config.yaml"

# Variables the host reads besides its settings: the configuration file, and the allow-list of
# entry-point plugins (jobhost/plugins/discovery.py).
EXTRA_JOBHOST_VARIABLES = frozenset({"JOBHOST_CONFIG", "JOBHOST_LOAD_PLUGINS"})
# What `jobhost run` serves when http_listen is set (docs/operations/observability.md).
SERVED_PATHS = frozenset({"/healthz", "/readyz", "/metrics", "/report"})
# The image's install location: commands may name the executable by this path or by PATH.
EXECUTABLES = frozenset({"jobhost", "/opt/jobhost/bin/jobhost"})


# -- reading the files ---------------------------------------------------------------------------


def _yaml() -> Any:
    # Imported by name so that the YAML library needs no type stubs here.
    return importlib.import_module("yaml")


@cache
def yaml_documents(path: Path) -> tuple[Any, ...]:
    with path.open(encoding="utf-8") as handle:
        return tuple(doc for doc in _yaml().safe_load_all(handle) if doc is not None)


def yaml_files() -> list[Path]:
    return sorted([*DEPLOY.rglob("*.yaml"), *DEPLOY.rglob("*.yml")])


def kubernetes_objects() -> list[dict[str, Any]]:
    objects: list[dict[str, Any]] = []
    for path in sorted(KUBERNETES.glob("*.yaml")):
        objects.extend(doc for doc in yaml_documents(path) if "kind" in doc)
    return objects


def kubernetes_object(kind: str, name: str | None = None) -> dict[str, Any]:
    found = [
        o
        for o in kubernetes_objects()
        if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)
    ]
    assert len(found) == 1, f"expected one {kind} {name or ''} in {KUBERNETES}, got {len(found)}"
    return found[0]


POD_KINDS = ("Deployment", "Job", "CronJob")


def pod_spec(kind: str) -> dict[str, Any]:
    spec: dict[str, Any] = kubernetes_object(kind)["spec"]
    if kind == "CronJob":
        spec = spec["jobTemplate"]["spec"]
    pod: dict[str, Any] = spec["template"]["spec"]
    return pod


def pod_containers(kind: str) -> list[dict[str, Any]]:
    spec = pod_spec(kind)
    return [*spec.get("initContainers", []), *spec["containers"]]


def compose() -> dict[str, Any]:
    (document,) = yaml_documents(COMPOSE)
    assert isinstance(document, dict)
    return document


def compose_services() -> dict[str, dict[str, Any]]:
    services: dict[str, dict[str, Any]] = compose()["services"]
    return services


def jobhost_services() -> dict[str, dict[str, Any]]:
    """The compose services built from the jobhost image."""
    return {
        name: service
        for name, service in compose_services().items()
        if service.get("build", {}).get("dockerfile") == "deploy/container/Dockerfile"
    }


def replica_services() -> dict[str, dict[str, Any]]:
    return {
        name: service
        for name, service in jobhost_services().items()
        if service_command(service)[1:] == ["run"]
    }


def service_environment(service: Mapping[str, Any]) -> dict[str, str]:
    raw = service.get("environment", {})
    if isinstance(raw, list):
        pairs = (item.partition("=") for item in raw)
        return {key: value for key, _, value in pairs}
    return {str(key): str(value) for key, value in raw.items()}


def dockerfile_lines() -> list[str]:
    """Instructions with their continuation lines joined, comments dropped."""
    lines: list[str] = []
    pending = ""
    for raw in DOCKERFILE.read_text().splitlines():
        stripped = raw.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        lines.append(pending + stripped)
        pending = ""
    return lines


def dockerfile_instruction(name: str) -> list[str]:
    prefix = name.upper() + " "
    return [line[len(prefix) :].strip() for line in dockerfile_lines() if line.startswith(prefix)]


def dockerfile_exec_form(name: str) -> list[str]:
    """The last ENTRYPOINT or CMD, which must be in exec (JSON) form."""
    (*_, text) = dockerfile_instruction(name)
    value = json.loads(text)
    assert isinstance(value, list), f"{name} must be in exec form (a JSON array): {text}"
    return [str(item) for item in value]


def dockerfile_environment() -> dict[str, str]:
    """The runtime stage's ENV, one ``KEY=value`` per instruction."""
    lines = dockerfile_lines()
    last_from = max(i for i, line in enumerate(lines) if line.startswith("FROM "))
    environment: dict[str, str] = {}
    for line in lines[last_from:]:
        if line.startswith("ENV "):
            key, _, value = line[4:].strip().partition("=")
            environment[key] = value
    return environment


def service_command(service: Mapping[str, Any]) -> list[str]:
    """What a compose service built from the image runs: the entry point and its command."""
    entrypoint = service.get("entrypoint", dockerfile_exec_form("ENTRYPOINT"))
    command = service.get("command", dockerfile_exec_form("CMD"))
    if isinstance(entrypoint, str):
        entrypoint = shlex.split(entrypoint)
    if isinstance(command, str):
        command = shlex.split(command)
    return [*entrypoint, *command]


def systemd_unit() -> configparser.ConfigParser:
    parser = configparser.ConfigParser(strict=False, interpolation=None, delimiters=("=",))
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string(SYSTEMD_UNIT.read_text())
    return parser


def env_file(path: Path, *, commented: bool) -> dict[str, str]:
    """``KEY=value`` lines; with ``commented``, ``#KEY=value`` examples count too."""
    pattern = re.compile(r"^(#\s*)?([A-Z][A-Z0-9_]*)=(.*)$")
    values: dict[str, str] = {}
    for line in path.read_text().splitlines():
        match = pattern.match(line.strip())
        if match and (commented or match[1] is None):
            values.setdefault(match[2], match[3])
    return values


def configmap_toml() -> dict[str, Any]:
    data = kubernetes_object("ConfigMap")["data"]
    return tomllib.loads(data["jobhost.toml"])


def command_lines() -> list[tuple[str, list[str]]]:
    """Every jobhost command line the recipes run, with where it comes from."""
    found: list[tuple[str, list[str]]] = [("Dockerfile", service_command({}))]
    for name, service in jobhost_services().items():
        found.append((f"compose service {name}", service_command(service)))
    for key in ("ExecStartPre", "ExecStart", "ExecStartPost", "ExecReload", "ExecStop"):
        if systemd_unit().has_option("Service", key):
            found.append((f"systemd {key}", shlex.split(systemd_unit()["Service"][key])))
    for kind in POD_KINDS:
        for container in pod_containers(kind):
            line = [*container.get("command", []), *container.get("args", [])]
            found.append((f"{kind} container {container['name']}", line))
    return found


def known_jobhost_variables() -> set[str]:
    return {f"JOBHOST_{name.upper()}" for name in Settings.model_fields} | EXTRA_JOBHOST_VARIABLES


def standard_otel_variables() -> set[str]:
    return {
        value
        for module in (otel_sdk_variables, otel_api_variables)
        for key, value in vars(module).items()
        if key.startswith("OTEL_") and isinstance(value, str)
    }


def environments() -> list[tuple[str, dict[str, str]]]:
    """Every environment the recipes give jobhost (secret references stand for their value)."""
    found = [
        ("Dockerfile ENV", dockerfile_environment()),
        ("systemd jobhost.env.example", env_file(SYSTEMD_ENV, commented=True)),
    ]
    for name, service in jobhost_services().items():
        found.append((f"compose service {name}", service_environment(service)))
    for kind in POD_KINDS:
        for container in pod_containers(kind):
            values = {item["name"]: str(item.get("value", "")) for item in container.get("env", [])}
            found.append((f"{kind} container {container['name']}", values))
    return found


def probe_paths() -> set[str]:
    """The HTTP paths the manifests and the image ask a host for."""
    paths: set[str] = set()
    for line in dockerfile_instruction("HEALTHCHECK"):
        paths.update(re.findall(r"https?://[^/'\"]+(/[A-Za-z0-9_/-]*)", line))
    for container in pod_containers("Deployment"):
        for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
            if probe in container:
                paths.add(container[probe]["httpGet"]["path"])
    annotations = kubernetes_object("Deployment")["spec"]["template"]["metadata"]["annotations"]
    paths.add(annotations["prometheus.io/path"])
    return paths


def shutdown_grace(values: Mapping[str, Any]) -> timedelta:
    """The grace a configuration gives, the setting's default when it says nothing."""
    raw = values.get("shutdown_grace", values.get("JOBHOST_SHUTDOWN_GRACE"))
    default = Settings.model_fields["shutdown_grace"].default
    assert isinstance(default, timedelta)
    return default if raw is None else parse_duration(raw)


# -- every file parses ---------------------------------------------------------------------------


@pytest.mark.parametrize("path", yaml_files(), ids=lambda p: str(p.relative_to(DEPLOY)))
def test_every_yaml_file_parses(path: Path) -> None:
    documents = yaml_documents(path)
    assert documents, f"{path} holds no YAML document"
    assert all(isinstance(doc, dict) for doc in documents)


def test_the_expected_files_exist() -> None:
    for path in (
        DOCKERFILE,
        DOCKERFILE.with_name("Dockerfile.dockerignore"),
        ROOT / ".dockerignore",
        COMPOSE,
        SYSTEMD_UNIT,
        SYSTEMD_ENV,
        COLLECTOR,
        *(KUBERNETES / n for n in ("deployment.yaml", "configmap.yaml", "secret.example.yaml")),
        *(KUBERNETES / n for n in ("migration-job.yaml", "pdb.yaml", "kustomization.yaml")),
        KUBERNETES / "health-cronjob.yaml",
        DEPLOY / "prometheus" / "jobhost-rules.yaml",
        DEPLOY / "prometheus" / "jobhost-rules.test.yaml",
        DEPLOY / "grafana" / "jobhost.json",
    ):
        assert path.is_file(), f"{path.relative_to(ROOT)} is missing"


def test_every_toml_configuration_parses_and_is_valid(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("JOBHOST_"):
            monkeypatch.delenv(name)
    tomls = {"configmap jobhost.toml": configmap_toml()}
    for path in sorted(DEPLOY.rglob("*.toml")):
        with path.open("rb") as handle:
            tomls[str(path.relative_to(DEPLOY))] = tomllib.load(handle)
    for where, data in tomls.items():
        try:
            settings = Settings.model_validate(data)
            # The modules' sections are checked by the modules, as a host would at start-up.
            declared = [
                registration.declaration.name
                for plugin in (retention, http_plugin)
                for registration in plugin.jobhost_jobs(settings=settings.modules)
            ]
        except Exception as error:  # pragma: no cover - the message is the point
            pytest.fail(f"{where} is not a valid jobhost.toml: {error}")
        http_entries = data.get("modules", {}).get("http", {}).get("jobs", [])
        assert len(declared) == 1 + len(http_entries), (where, declared)


@pytest.mark.parametrize(
    "config",
    ["compose", "configmap"],
)
def test_configuration_files_give_a_valid_catalog(config: str, tmp_path: Path) -> None:
    if config == "compose":
        path = DEPLOY / "compose" / "jobhost.toml"
    else:
        path = tmp_path / "jobhost.toml"
        path.write_text(kubernetes_object("ConfigMap")["data"]["jobhost.toml"])
    env = _clean_environment()
    env["JOBHOST_CONFIG"] = str(path)
    result = _jobhost(["validate", "--json"], env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert json.loads(result.stdout)["ok"] is True


def test_systemd_unit_parses_with_the_hardening_it_promises() -> None:
    unit = systemd_unit()
    assert {"Unit", "Service", "Install"} <= set(unit.sections())
    service = unit["Service"]
    assert service["User"] not in {"root", "0"}
    assert service["ProtectSystem"] == "strict"
    assert service["NoNewPrivileges"] == "yes"
    assert service["PrivateTmp"] == "yes"
    assert service["Restart"] == "on-failure"
    assert service["KillSignal"] == "SIGTERM"
    assert service["EnvironmentFile"].lstrip("-") == "/etc/jobhost/jobhost.env"
    state = f"/var/lib/{service['StateDirectory']}"
    assert state in service["ReadWritePaths"].split()
    assert service["WorkingDirectory"] == state
    # The SQLite store of the example environment lives where the service may write.
    database = make_url(env_file(SYSTEMD_ENV, commented=False)["JOBHOST_DATABASE_URL"])
    assert database.database is not None
    assert database.database.startswith(state + "/")


def test_systemd_environment_file_lines_are_plain_assignments() -> None:
    for number, line in enumerate(SYSTEMD_ENV.read_text().splitlines(), start=1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        assert re.fullmatch(r"[A-Z][A-Z0-9_]*=\S*", text), f"line {number}: {line!r}"


# -- commands ------------------------------------------------------------------------------------


def _clean_environment() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("JOBHOST_", "OTEL_"))}


def _jobhost(
    args: list[str], env: Mapping[str, str], **options: Any
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "jobhost", *args],
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        **options,
    )


def _split(line: list[str]) -> tuple[list[str], list[str]]:
    """(sub-command path, flags) of a jobhost command line."""
    assert line and line[0] in EXECUTABLES, f"not a jobhost command line: {line}"
    path = [token for token in line[1:] if not token.startswith("-")]
    flags = [token.partition("=")[0] for token in line[1:] if token.startswith("-")]
    return path, flags


def _command(path: list[str]) -> click.Command:
    _register_commands()
    command: click.Command = cli
    for name in path:
        assert isinstance(command, click.Group), f"{' '.join(path)}: {name} is not a sub-command"
        found = command.commands.get(name)
        assert found is not None, f"jobhost has no command {' '.join(path)}"
        command = found
    return command


@pytest.mark.parametrize("where,line", command_lines(), ids=[w for w, _ in command_lines()])
def test_every_command_line_exists_with_its_flags(where: str, line: list[str]) -> None:
    path, flags = _split(line)
    result = _jobhost([*path, "--help"], _clean_environment())
    assert result.returncode == 0, f"{where}: jobhost {' '.join(path)} --help: {result.stderr}"
    command = _command(path)
    declared = {opt for param in command.params for opt in [*param.opts, *param.secondary_opts]}
    for flag in flags:
        assert flag in result.stdout, f"{where}: {flag} is not in `jobhost {' '.join(path)} --help`"
        assert flag in declared, f"{where}: {flag} is not an option of jobhost {' '.join(path)}"


def test_the_recipes_run_the_commands_the_issue_names() -> None:
    lines = {tuple(_split(line)[0] + _split(line)[1]) for _, line in command_lines()}
    assert ("run",) in lines
    assert ("db", "upgrade") in lines
    assert ("health", "--no-hosts") in lines
    assert ("health",) in lines


# -- environment ---------------------------------------------------------------------------------


@pytest.mark.parametrize("where,values", environments(), ids=[w for w, _ in environments()])
def test_every_variable_is_one_the_host_or_the_sdk_knows(
    where: str, values: dict[str, str]
) -> None:
    known = known_jobhost_variables()
    otel = standard_otel_variables()
    for name in values:
        if name.startswith("JOBHOST_"):
            assert name in known, f"{where}: {name} is not a jobhost setting"
        elif name.startswith("OTEL_"):
            assert name in otel, f"{where}: {name} is not a standard OpenTelemetry SDK variable"
        else:
            assert name in {"PATH", "PYTHONUNBUFFERED"}, f"{where}: unexpected variable {name}"


def test_every_value_passes_the_settings_validation(monkeypatch: pytest.MonkeyPatch) -> None:
    secret = kubernetes_object("Secret")["stringData"]
    for where, values in [
        ("Dockerfile ENV", dockerfile_environment()),
        ("systemd env (examples uncommented)", env_file(SYSTEMD_ENV, commented=True)),
        *((f"compose {n}", service_environment(s)) for n, s in jobhost_services().items()),
    ]:
        with monkeypatch.context() as patch:
            for name in list(os.environ):
                if name.startswith("JOBHOST_"):
                    patch.delenv(name)
            for name, value in values.items():
                if name.startswith("JOBHOST_") and name not in EXTRA_JOBHOST_VARIABLES:
                    patch.setenv(name, value)
            try:
                load_settings()
            except Exception as error:  # pragma: no cover - the message is the point
                pytest.fail(f"{where}: {error}")
    for url in secret.values():
        Settings.model_validate({"database_url": url})


def test_probe_paths_are_served() -> None:
    paths = probe_paths()
    assert {"/healthz", "/readyz", "/metrics"} <= paths
    assert paths <= SERVED_PATHS


# -- the image -----------------------------------------------------------------------------------


def test_dockerfile_is_multi_stage_non_root_and_execs_jobhost_run() -> None:
    assert len(dockerfile_instruction("FROM")) >= 2
    users = dockerfile_instruction("USER")
    assert users, "the image must not run as root"
    assert users[-1].split(":")[0] not in {"root", "0"}
    assert service_command({}) == ["jobhost", "run"]
    assert dockerfile_instruction("STOPSIGNAL") == ["SIGTERM"]
    assert dockerfile_environment()["JOBHOST_HTTP_LISTEN"] == "0.0.0.0:8080"
    (healthcheck,) = dockerfile_instruction("HEALTHCHECK")
    assert "/healthz" in healthcheck
    assert "curl" not in healthcheck


def test_dockerfile_installs_like_readme_but_not_editable() -> None:
    installs = [line for line in dockerfile_instruction("RUN") if "pip install" in line]
    packages = " ".join(installs)
    assert "-c constraints.txt" in packages
    for package in ("./contracts", "./modules/files", "./modules/http", "./modules/publish", " ."):
        assert package in packages
    assert " -e" not in packages


def test_dockerignore_keeps_what_the_image_copies() -> None:
    beside = DOCKERFILE.with_name("Dockerfile.dockerignore").read_text()
    root = (ROOT / ".dockerignore").read_text()
    assert beside == root, "deploy/container/Dockerfile.dockerignore and .dockerignore differ"
    ignored = {line.strip().rstrip("/") for line in root.splitlines()}
    for copy in dockerfile_instruction("COPY"):
        if copy.startswith("--from"):
            continue
        *sources, _target = copy.split()
        for source in sources:
            assert (ROOT / source).exists(), f"COPY {source}: not in the repository"
            assert source.rstrip("/") not in ignored, f"COPY {source}: excluded by .dockerignore"


# -- compose -------------------------------------------------------------------------------------


def test_compose_runs_a_migration_then_two_replicas_on_one_database() -> None:
    services = compose_services()
    replicas = replica_services()
    assert len(replicas) == 2
    (migrate,) = [
        s for s in jobhost_services().values() if service_command(s)[1:] == ["db", "upgrade"]
    ]
    migrate_name = next(n for n, s in services.items() if s is migrate)
    assert migrate.get("restart") == "no"
    databases = set()
    host_ids = set()
    for name, service in replicas.items():
        env = service_environment(service)
        assert env["JOBHOST_AUTO_MIGRATE"] == "false", name
        depends = service["depends_on"]
        assert depends[migrate_name]["condition"] == "service_completed_successfully", name
        databases.add(env["JOBHOST_DATABASE_URL"])
        host_ids.add(env.get("JOBHOST_HOST_ID"))
        grace = shutdown_grace(env)
        assert parse_duration(service["stop_grace_period"]) > grace, name
        assert env["OTEL_EXPORTER_OTLP_ENDPOINT"]
        assert env["OTEL_EXPORTER_OTLP_PROTOCOL"] in {"grpc", "http/protobuf"}
    assert len(databases) == 1
    assert len(host_ids) == 2 and None not in host_ids
    url = make_url(databases.pop())
    assert url.get_backend_name() == "postgresql"
    assert url.host in services, "the replicas' database host is a compose service"
    assert services[url.host]["image"].startswith("postgres:")
    migrate_url = service_environment(migrate)["JOBHOST_DATABASE_URL"]
    assert make_url(migrate_url) == url


def test_compose_sends_telemetry_to_the_collector_it_runs() -> None:
    services = compose_services()
    for name, service in replica_services().items():
        endpoint = service_environment(service)["OTEL_EXPORTER_OTLP_ENDPOINT"]
        host, _, port = endpoint.split("://", 1)[1].partition(":")
        assert host in services, f"{name}: {endpoint} is not a compose service"
        collector = services[host]
        assert "opentelemetry-collector" in collector["image"]
        mounted = [v.split(":")[0] for v in collector.get("volumes", [])]
        assert any((COMPOSE.parent / m).resolve() == COLLECTOR for m in mounted)
        receivers = yaml_documents(COLLECTOR)[0]["receivers"]["otlp"]["protocols"]
        protocol = service_environment(service)["OTEL_EXPORTER_OTLP_PROTOCOL"]
        key = "grpc" if protocol == "grpc" else "http"
        assert receivers[key]["endpoint"].endswith(f":{port.rstrip('/')}")


def test_compose_mounts_what_jobhost_config_names() -> None:
    for name, service in jobhost_services().items():
        config = service_environment(service).get("JOBHOST_CONFIG")
        if config is None:
            continue
        sources = [v.split(":")[0] for v in service.get("volumes", []) if v.split(":")[1] == config]
        assert len(sources) == 1, f"{name}: JOBHOST_CONFIG={config} is not mounted"
        assert (COMPOSE.parent / sources[0]).is_file()


def test_collector_pipelines_use_declared_components() -> None:
    (config,) = yaml_documents(COLLECTOR)
    pipelines = config["service"]["pipelines"]
    assert {"traces", "metrics"} <= set(pipelines)
    for pipeline in pipelines.values():
        for kind in ("receivers", "processors", "exporters"):
            for component in pipeline.get(kind, []):
                assert component in config[kind], f"{component} is not declared under {kind}"
    assert {"debug", "prometheus"} <= set(config["exporters"])
    assert {"grpc", "http"} <= set(config["receivers"]["otlp"]["protocols"])


# -- Kubernetes ----------------------------------------------------------------------------------


def test_deployment_has_two_replicas_probes_and_a_long_enough_grace() -> None:
    deployment = kubernetes_object("Deployment")
    assert deployment["spec"]["replicas"] == 2
    spec = pod_spec("Deployment")
    (container,) = spec["containers"]
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    grace = shutdown_grace(configmap_toml())
    assert spec["terminationGracePeriodSeconds"] > grace.total_seconds()
    annotations = deployment["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/scrape"] == "true"
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    listen = configmap_toml()["http_listen"]
    assert int(annotations["prometheus.io/port"]) == int(listen.rpartition(":")[2])
    assert ports[container["livenessProbe"]["httpGet"]["port"]] == int(
        annotations["prometheus.io/port"]
    )
    assert configmap_toml()["auto_migrate"] is False


@pytest.mark.parametrize("kind", POD_KINDS)
def test_pods_read_the_configmap_and_the_secret(kind: str) -> None:
    spec = pod_spec(kind)
    configmap = kubernetes_object("ConfigMap")
    secret = kubernetes_object("Secret")
    volumes = {v["name"]: v for v in spec["volumes"]}
    for container in pod_containers(kind):
        env = {item["name"]: item for item in container["env"]}
        config = Path(env["JOBHOST_CONFIG"]["value"])
        mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
        volume = volumes[mounts[str(config.parent)]]
        assert volume["configMap"]["name"] == configmap["metadata"]["name"]
        assert config.name in configmap["data"]
        reference = env["JOBHOST_DATABASE_URL"]["valueFrom"]["secretKeyRef"]
        assert reference["name"] == secret["metadata"]["name"]
        assert reference["key"] in secret["stringData"]


def test_migration_job_upgrades_then_gates_on_health() -> None:
    spec = pod_spec("Job")
    (migrate,) = spec["initContainers"]
    (gate,) = spec["containers"]
    assert [*migrate["command"], *migrate["args"]] == ["jobhost", "db", "upgrade"]
    assert [*gate["command"], *gate["args"]] == ["jobhost", "health", "--no-hosts"]
    assert spec["restartPolicy"] == "Never"


def test_pdb_and_kustomization_point_at_what_exists() -> None:
    pdb = kubernetes_object("PodDisruptionBudget")
    labels = kubernetes_object("Deployment")["spec"]["template"]["metadata"]["labels"]
    selector = pdb["spec"]["selector"]["matchLabels"]
    assert selector.items() <= labels.items()
    assert pdb["spec"]["minAvailable"] < kubernetes_object("Deployment")["spec"]["replicas"]
    (kustomization,) = yaml_documents(KUBERNETES / "kustomization.yaml")
    for resource in kustomization["resources"]:
        assert (KUBERNETES / resource).is_file(), resource


def test_systemd_stop_timeout_outlasts_the_shutdown_grace() -> None:
    timeout = _systemd_seconds(systemd_unit()["Service"]["TimeoutStopSec"])
    assert timeout > shutdown_grace(env_file(SYSTEMD_ENV, commented=False))


def _systemd_seconds(text: str) -> timedelta:
    """A systemd time span: a bare number is seconds, else units as jobhost writes them."""
    return timedelta(seconds=int(text)) if text.isdigit() else parse_duration(text.replace(" ", ""))


# -- the compose replica, for real ---------------------------------------------------------------


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _container_environment(
    service: Mapping[str, Any], postgres_url: str, tmp: Path
) -> dict[str, str]:
    """What the container of ``service`` gets, pointed at the test database and a free port."""
    env = {k: v for k, v in dockerfile_environment().items() if k != "PATH"}
    env.update(service_environment(service))
    declared = make_url(env["JOBHOST_DATABASE_URL"])
    local = make_url(postgres_url)
    assert declared.get_backend_name() == local.get_backend_name() == "postgresql"
    env["JOBHOST_DATABASE_URL"] = declared.set(
        host=local.host,
        port=local.port,
        username=local.username,
        password=local.password,
        database=local.database,
        query=local.query,
    ).render_as_string(hide_password=False)
    if "JOBHOST_CONFIG" in env:
        mounts = {v.split(":")[1]: v.split(":")[0] for v in service.get("volumes", [])}
        copy = tmp / Path(env["JOBHOST_CONFIG"]).name
        copy.write_bytes((COMPOSE.parent / mounts[env["JOBHOST_CONFIG"]]).read_bytes())
        env["JOBHOST_CONFIG"] = str(copy)
    # The process's own basics: where programs are, nothing of the test runner's JOBHOST_*.
    env["PATH"] = os.environ.get("PATH", "/usr/bin:/bin")
    return env


def _get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return 0, b""


@pytest.fixture
def compose_replica(
    postgres_url: str, tmp_path: Path
) -> Iterator[tuple[subprocess.Popen[bytes], str, Path]]:
    services = compose_services()
    migrate = next(
        s for s in jobhost_services().values() if service_command(s)[1:] == ["db", "upgrade"]
    )
    name, replica = sorted(replica_services().items())[0]
    migrate_env = _container_environment(migrate, postgres_url, tmp_path)
    upgrade = _jobhost(service_command(migrate)[1:], migrate_env, cwd=tmp_path)
    assert upgrade.returncode == 0, upgrade.stdout + upgrade.stderr

    env = _container_environment(replica, postgres_url, tmp_path)
    host, _, _ = env["JOBHOST_HTTP_LISTEN"].rpartition(":")
    port = _free_port()
    env["JOBHOST_HTTP_LISTEN"] = f"{host}:{port}"
    log = tmp_path / f"{name}.log"
    with log.open("wb") as output:
        process = subprocess.Popen(
            [sys.executable, "-m", "jobhost", *service_command(replica)[1:]],
            env=env,
            cwd=tmp_path,
            stdout=output,
            stderr=subprocess.STDOUT,
        )
    assert "postgres" in services
    try:
        yield process, f"http://127.0.0.1:{port}", log
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)


@pytest.mark.postgres
@pytest.mark.slow
def test_a_replica_started_as_compose_starts_it_answers_every_probe(
    compose_replica: tuple[subprocess.Popen[bytes], str, Path],
) -> None:
    process, base, log = compose_replica
    wanted = sorted(probe_paths() | {"/report"})
    statuses: dict[str, int] = {}

    def all_answer() -> bool:
        if process.poll() is not None:
            pytest.fail(f"jobhost run exited {process.returncode}:\n{log.read_text()}")
        statuses.update({path: _get(base + path)[0] for path in wanted})
        return all(status == 200 for status in statuses.values())

    wait_for(all_answer, 60, f"every probe to answer 200 ({wanted})", every=0.25)
    _, report = _get(base + "/report")
    assert "jobs" in json.loads(report)
    # The host's own list of what it serves is the one the static checks above rely on.
    status, missing = _get(base + "/no-such-endpoint")
    assert status == 404
    assert set(json.loads(missing)["endpoints"]) >= SERVED_PATHS
    # /metrics is Prometheus text; it may be empty before the first run has finished.
    _, metrics = _get(base + "/metrics")
    assert all(line.startswith("#") or " " in line for line in metrics.decode().splitlines())

    # SIGTERM, as the container runtime sends it: a clean exit 0 well within stop_grace_period.
    process.send_signal(signal.SIGTERM)
    _, replica = sorted(replica_services().items())[0]
    limit = parse_duration(replica["stop_grace_period"]).total_seconds()
    try:
        code = process.wait(limit)
    except subprocess.TimeoutExpired:
        pytest.fail(
            f"no exit within stop_grace_period ({limit}s) after SIGTERM:\n{log.read_text()}"
        )
    assert code == 0, log.read_text()
