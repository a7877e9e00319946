"""The recipes under ``deploy/`` kept honest without a container engine: the files and the image.

Every file parses; every ``jobhost`` command line they run exists with those flags; every
``JOBHOST_*`` variable they set is a setting the host knows (and its value passes validation);
every ``OTEL_*`` variable is one the OpenTelemetry SDK defines; every probe path is served; the
image installs and runs what the README says. Compose and Kubernetes are checked in
``test_deploy_orchestration.py``, and one replica started as compose starts it in
``test_compose_replica.py``.
"""

from __future__ import annotations

import json
import os
import re
import tomllib
from pathlib import Path

import click
import pytest
from jobhost_http import plugin as http_plugin
from sqlalchemy.engine import make_url

from jobhost.builtin import retention
from jobhost.cli import cli
from jobhost.config import Settings, load_settings
from tests.commands import register_commands
from tests.deploy.recipes import (
    COLLECTOR,
    COMPOSE,
    DEPLOY,
    DOCKERFILE,
    EXECUTABLES,
    EXTRA_JOBHOST_VARIABLES,
    KUBERNETES,
    ROOT,
    SERVED_PATHS,
    SYSTEMD_ENV,
    SYSTEMD_UNIT,
    clean_environment,
    command_lines,
    configmap_toml,
    dockerfile_environment,
    dockerfile_instruction,
    env_file,
    environments,
    jobhost_services,
    known_jobhost_variables,
    kubernetes_object,
    probe_paths,
    run_jobhost,
    service_command,
    service_environment,
    standard_otel_variables,
    systemd_unit,
    yaml_documents,
    yaml_files,
)

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
    env = clean_environment()
    env["JOBHOST_CONFIG"] = str(path)
    result = run_jobhost(["validate", "--json"], env)
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


def _split(line: list[str]) -> tuple[list[str], list[str]]:
    """(sub-command path, flags) of a jobhost command line."""
    assert line and line[0] in EXECUTABLES, f"not a jobhost command line: {line}"
    path = [token for token in line[1:] if not token.startswith("-")]
    flags = [token.partition("=")[0] for token in line[1:] if token.startswith("-")]
    return path, flags


def _command(path: list[str]) -> click.Command:
    register_commands()
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
    result = run_jobhost([*path, "--help"], clean_environment())
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
