"""Reading the recipes under ``deploy/``: the files, the objects they declare, the commands and
environments they give ``jobhost``, as the tests of this folder check them."""

from __future__ import annotations

import configparser
import importlib
import json
import os
import re
import shlex
import subprocess
import sys
import tomllib
from collections.abc import Mapping
from datetime import timedelta
from functools import cache
from pathlib import Path
from typing import Any

import opentelemetry.environment_variables as otel_api_variables
import opentelemetry.sdk.environment_variables as otel_sdk_variables
from jobhost_contracts import parse_duration

from jobhost.config import Settings

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
DOCKERFILE = DEPLOY / "container" / "Dockerfile"
COMPOSE = DEPLOY / "compose" / "compose.yaml"
SYSTEMD_UNIT = DEPLOY / "systemd" / "jobhost.service"
SYSTEMD_ENV = DEPLOY / "systemd" / "jobhost.env.example"
KUBERNETES = DEPLOY / "kubernetes"
COLLECTOR = DEPLOY / "otel-collector" / "config.yaml"

# Variables the host reads besides its settings: the configuration file, and the allow-list of
# entry-point plugins (jobhost/plugins/__init__.py).
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


def clean_environment() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("JOBHOST_", "OTEL_"))}


def run_jobhost(
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
