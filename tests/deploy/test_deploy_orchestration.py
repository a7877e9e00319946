"""The compose file, the Kubernetes manifests and the systemd unit agree with the host: two
replicas on one database after a migration, telemetry sent where a collector listens, probes and
a stop grace that outlasts the host's shutdown grace."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from jobhost_contracts import parse_duration
from sqlalchemy.engine import make_url

from tests.deploy.recipes import (
    COLLECTOR,
    COMPOSE,
    KUBERNETES,
    POD_KINDS,
    SYSTEMD_ENV,
    compose_services,
    configmap_toml,
    env_file,
    jobhost_services,
    kubernetes_object,
    pod_containers,
    pod_spec,
    replica_services,
    service_command,
    service_environment,
    shutdown_grace,
    systemd_unit,
    yaml_documents,
)

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
