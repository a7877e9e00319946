"""The operator's manual cannot fall behind the code.

Every CLI command and its flags, every setting with its environment variable and default, every
metric (by its instrument name and its Prometheus name), every span attribute and every hook
appears in ``docs/operations/``; every ``jobhost ...`` command line the pages show exists with
those flags; the ``--json`` keys the commands print are documented; the alert rules name only
metrics the host exports; and the example module of writing-a-module.md loads and its tests pass.
"""

from __future__ import annotations

import importlib
import inspect
import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from functools import cache
from pathlib import Path
from typing import Any

import click
import pytest
from jobhost_contracts import format_duration
from jobhost_contracts import hooks as contract_hooks
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.trace import TracerProvider

from jobhost.catalog import build_catalog
from jobhost.cli import cli
from jobhost.cli._app import _register_commands
from jobhost.config import RUNTIME_SECRET_PREFIX, Settings
from jobhost.envelope.telemetry import OUTCOMES, Telemetry
from jobhost.firing.host import HostStatus
from jobhost.operations.gauges import JobGauges, StoreFigures, register_gauges
from jobhost.rules.desired import desired_schedules
from jobhost.store import create_store_engine
from jobhost.store.registry import sync_schedules
from jobhost.web import prometheus_reader

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "operations"
PAGES = (
    "README.md",
    "running.md",
    "commands.md",
    "settings.md",
    "semantics.md",
    "observability.md",
    "dashboard.md",
    "runbook.md",
    "writing-a-module.md",
    "publish.md",
    "api.md",
)
ENVELOPE = ROOT / "jobhost" / "envelope" / "envelope.py"
RULES = ROOT / "deploy" / "prometheus" / "jobhost-rules.yaml"
DASHBOARD = ROOT / "deploy" / "grafana" / "jobhost.json"
HELP_OPTIONS = frozenset({"-h", "--help"})


# -- reading the manual --------------------------------------------------------------------------


@cache
def page(name: str) -> str:
    return (DOCS / name).read_text(encoding="utf-8")


def manual() -> str:
    return "\n".join(page(name) for name in PAGES)


def sections(text: str, level: str) -> dict[str, str]:
    """Heading text -> body, for headings of exactly ``level`` (``##`` or ``###``)."""
    parts = re.split(rf"^{level} (.+)$", text, flags=re.MULTILINE)
    return {parts[i].strip(): parts[i + 1] for i in range(1, len(parts) - 1, 2)}


def fenced_blocks(text: str, language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```", text, flags=re.MULTILINE | re.DOTALL)


def normalised(text: str) -> str:
    return " ".join(text.split())


# -- the code's side -----------------------------------------------------------------------------


def commands() -> dict[str, click.Command]:
    """Every command and group below ``jobhost``, by path (``db upgrade``)."""
    _register_commands()
    found: dict[str, click.Command] = {}

    def walk(group: click.Group, prefix: str) -> None:
        for name, command in group.commands.items():
            path = f"{prefix}{name}"
            found[path] = command
            if isinstance(command, click.Group):
                walk(command, f"{path} ")

    walk(cli, "")
    return found


def leaf_commands() -> dict[str, click.Command]:
    return {p: c for p, c in commands().items() if not isinstance(c, click.Group)}


def options(command: click.Command) -> list[str]:
    names = [o for p in command.params for o in [*p.opts, *p.secondary_opts] if o.startswith("-")]
    return [name for name in names if name not in HELP_OPTIONS]


def arguments(command: click.Command) -> list[str]:
    return [p.human_readable_name for p in command.params if isinstance(p, click.Argument)]


def documented_default(name: str) -> str:
    """A setting's default as settings.md writes it."""
    field = Settings.model_fields[name]
    value = field.default_factory() if field.default_factory is not None else field.default  # type: ignore[call-arg]
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, timedelta):
        return format_duration(value)
    if isinstance(value, list | dict) and not value:
        return "empty"
    return str(value)


def hookspecs() -> dict[str, Any]:
    return {
        name: function
        for name, function in vars(contract_hooks).items()
        if name.startswith("jobhost_") and inspect.isfunction(function)
    }


def instruments() -> list[Any]:
    """The instruments a Telemetry creates, read from the object itself."""
    telemetry = Telemetry(TracerProvider(), MeterProvider())
    found = [v for v in vars(telemetry).values() if hasattr(v, "name") and hasattr(v, "unit")]
    assert found, "Telemetry created no instruments"
    return found


@cache
def prometheus_exposition() -> str:
    """What ``/metrics`` shows once every instrument has recorded something."""
    reader, render = prometheus_reader()
    meter_provider = MeterProvider(metric_readers=[reader])
    telemetry = Telemetry(TracerProvider(), meter_provider)
    telemetry.runs.add(1, {"job": "a.b", "outcome": "succeeded"})
    telemetry.duration.record(1.0, {"job": "a.b", "outcome": "succeeded"})
    telemetry.lag.record(1.0, {"job": "a.b"})
    telemetry.sink_failures.add(1, {"sink": "s", "job": "a.b"})
    telemetry.units.add(1, {"job": "a.b", "result": "succeeded"})
    telemetry.audit_dropped.add(1, {"sink": "s"})
    host = _GaugeHost()
    register_gauges(telemetry.meter, host, _Figures(host))
    try:
        return render().decode()
    finally:
        meter_provider.shutdown()


class _Figures(JobGauges):
    """The gauges over fixed figures: one overdue critical job, one live host."""

    def figures(self) -> StoreFigures:
        return StoreFigures(
            live_hosts=1,
            by_status={"overdue": 1},
            overdue=[("a.b", True)],
            skew_seconds={"host-1": 0.1},
        )


class _GaugeHost:
    host_id = "host-1"
    settings = Settings()
    catalog = None
    engine = None
    clock = None
    status = HostStatus(store_ok=True)


def prometheus_families() -> set[str]:
    return set(re.findall(r"^# TYPE (jobhost_\w+) ", prometheus_exposition(), flags=re.MULTILINE))


def prometheus_series_names() -> set[str]:
    return set(re.findall(r"^(jobhost_\w+)\{", prometheus_exposition(), flags=re.MULTILINE))


def span_attributes() -> set[str]:
    return set(re.findall(r'"(jobhost\.(?:job|run)\.[a-z_]+)"', ENVELOPE.read_text()))


# -- coverage ------------------------------------------------------------------------------------


def test_every_page_exists_and_the_index_links_them() -> None:
    for name in PAGES:
        assert (DOCS / name).is_file(), f"docs/operations/{name} is missing"
    for name in PAGES[1:]:
        assert f"]({name})" in page("README.md"), f"README.md does not link {name}"


@pytest.mark.parametrize("path", sorted(commands()))
def test_every_command_is_documented(path: str) -> None:
    assert f"jobhost {path}" in page("commands.md"), f"`jobhost {path}` is not in commands.md"


def _command_section(path: str) -> str:
    for heading, body in sections(page("commands.md"), "##").items():
        if f"jobhost {path}" in [part.strip() for part in heading.split("/")]:
            return body
    pytest.fail(f"commands.md has no section `## jobhost {path}`")


@pytest.mark.parametrize("path", sorted(leaf_commands()))
def test_every_command_section_has_its_flags_arguments_exit_codes_and_json(path: str) -> None:
    command = leaf_commands()[path]
    body = _command_section(path)
    for option in options(command):
        assert option in body, f"jobhost {path}: {option} is not documented in its section"
    for argument in arguments(command):
        assert argument in body, f"jobhost {path}: argument {argument} is not documented"
    assert "Exit codes:" in body, f"jobhost {path}: no exit codes"
    if "--json" in options(command):
        assert "JSON:" in body, f"jobhost {path}: no --json shape"


def test_global_options_are_documented() -> None:
    body = sections(page("commands.md"), "##")["Global options"]
    for option in [*options(cli), "-h", "--help"]:
        assert option in body


def test_every_exit_code_is_explained() -> None:
    from jobhost.cli import _app

    table = sections(page("commands.md"), "##")["Exit codes"]
    for name in ("EXIT_OK", "EXIT_FAILED", "EXIT_USAGE", "EXIT_INVALID", "EXIT_TIMEOUT"):
        assert f"| {getattr(_app, name)} |" in table, name


@pytest.mark.parametrize("name", sorted(Settings.model_fields))
def test_every_setting_is_documented_with_its_variable_and_default(name: str) -> None:
    settings = sections(page("settings.md"), "###")
    assert name in settings, f"settings.md has no section `### {name}`"
    body = settings[name]
    assert f"`JOBHOST_{name.upper()}`" in body, f"{name}: JOBHOST_{name.upper()} not named"
    default = re.search(r"^- Default: `?([^`\n]+)`?$", body, flags=re.MULTILINE)
    assert default is not None, f"{name}: no `- Default:` line"
    assert default[1] == documented_default(name), f"{name}: the code's default differs"
    assert "- Allowed:" in body, f"{name}: no `- Allowed:` line"


def test_every_environment_variable_the_manual_names_is_real() -> None:
    known = {f"JOBHOST_{name.upper()}" for name in Settings.model_fields}
    known |= {"JOBHOST_CONFIG", "JOBHOST_LOAD_PLUGINS"}
    named = set(re.findall(r"\bJOBHOST_[A-Z_]+\b", manual()))
    # Variables under the runtime secret prefix are secrets for runtime jobs, not settings.
    named = {name for name in named if not name.startswith(RUNTIME_SECRET_PREFIX)}
    assert named - known == set(), "the manual names variables the host does not read"


@pytest.mark.parametrize("instrument", instruments(), ids=lambda i: str(i.name))
def test_every_metric_is_documented_with_its_unit(instrument: Any) -> None:
    text = page("observability.md")
    row = next((line for line in text.splitlines() if f"| `{instrument.name}` |" in line), None)
    assert row is not None, f"{instrument.name} has no row in observability.md"
    unit = "seconds" if instrument.unit == "s" else f"`{instrument.unit}`"
    assert unit in row, f"{instrument.name}: unit {instrument.unit} not in its row"


@pytest.mark.parametrize("family", sorted(prometheus_families()))
def test_every_prometheus_name_is_documented(family: str) -> None:
    assert family in page("observability.md")


@pytest.mark.parametrize("attribute", sorted(span_attributes()))
def test_every_span_attribute_is_documented(attribute: str) -> None:
    assert f"`{attribute}`" in page("observability.md")


def test_every_outcome_is_documented() -> None:
    for outcome in OUTCOMES:
        assert f"`{outcome}`" in page("observability.md"), outcome
        assert f"`{outcome}`" in page("semantics.md"), outcome


@pytest.mark.parametrize("name", sorted(hookspecs()))
def test_every_hook_is_documented_with_its_exact_signature(name: str) -> None:
    body = sections(page("writing-a-module.md"), "###").get(name)
    assert body is not None, f"writing-a-module.md has no section `### {name}`"
    signature = inspect.signature(hookspecs()[name])
    for parameter in signature.parameters.values():
        assert f"{parameter.name}: {parameter.annotation}" in normalised(body), parameter
    assert f"-> {signature.return_annotation}" in normalised(body)
    assert name in page("README.md") or name in page("writing-a-module.md")


# -- the examples are true -----------------------------------------------------------------------


def _command_lines() -> Iterator[tuple[str, str]]:
    """(page, text after `jobhost`) for every command line the manual shows.

    A command line is an inline code span, or a line of a code block, that starts with
    ``jobhost`` (after an optional ``$`` prompt, ``VAR=value`` assignments and a directory).
    """
    start = re.compile(r"^(?:\$ )?(?:[A-Z_][A-Z0-9_]*=\S+\s+)*(?:\S*/)?jobhost (.*)$")
    for name in PAGES:
        text = page(name)
        pieces = re.findall(r"`([^`\n]+)`", text)
        pieces += [line for line in text.splitlines() if line.startswith("    ")]
        for block in fenced_blocks(text, r"[a-z]*"):
            pieces.extend(block.splitlines())
        for piece in pieces:
            match = start.match(piece.strip())
            if match:
                yield name, re.split(r"\s#|\s\|\s|;|&&", match[1])[0].strip()


def _tokens(text: str) -> list[str]:
    try:
        tokens = shlex.split(text)
    except ValueError:
        tokens = text.split()
    return [t.strip("[]") for t in tokens if t.strip("[]") not in {"", "|", "..."}]


def shown_command_lines() -> list[tuple[str, list[str]]]:
    lines: list[tuple[str, list[str]]] = []
    for name, text in _command_lines():
        tokens = _tokens(text)
        # Global options first.
        while tokens and tokens[0] in {"--config", "--version", "-h", "--help"}:
            tokens = tokens[2:] if tokens[0] == "--config" else tokens[1:]
        if not tokens or not re.fullmatch(r"[a-z]+", tokens[0]):
            continue  # prose such as "CREATE USER jobhost WITH ...", or the bare group
        lines.append((name, tokens))
    return lines


def test_the_manual_shows_command_lines_at_all() -> None:
    assert len(shown_command_lines()) > 50


@pytest.mark.parametrize(
    "where,tokens",
    shown_command_lines(),
    ids=[f"{w}:{' '.join(t)[:40]}" for w, t in shown_command_lines()],
)
def test_every_command_line_the_manual_shows_exists_with_its_flags(
    where: str, tokens: list[str]
) -> None:
    known = commands()
    path = tokens[0]
    assert path in known, f"{where}: `jobhost {' '.join(tokens)}`: no command {path}"
    rest = tokens[1:]
    if isinstance(known[path], click.Group) and rest and not rest[0].startswith("-"):
        path = f"{path} {rest[0]}"
        assert path in known, f"{where}: `jobhost {' '.join(tokens)}`: no command {path}"
        rest = rest[1:]
    command = known[path]
    declared = {o for p in command.params for o in [*p.opts, *p.secondary_opts]} | HELP_OPTIONS
    for token in rest:
        if token.startswith("-") and not re.fullmatch(r"-\d.*", token):
            flag = token.partition("=")[0]
            assert flag in declared, f"{where}: `jobhost {' '.join(tokens)}`: {flag} unknown"


def next_examples() -> list[tuple[str, list[str], list[str]]]:
    """(page, arguments, output lines) of every ``$ jobhost next ...`` example with its output."""
    found: list[tuple[str, list[str], list[str]]] = []
    for name in PAGES:
        lines = page(name).splitlines()
        for index, line in enumerate(lines):
            if not line.startswith("    $ jobhost next "):
                continue
            output: list[str] = []
            for following in lines[index + 1 :]:
                if not following.startswith("    ") or following.startswith("    $ "):
                    break
                output.append(following[4:])
            if output:
                found.append((name, shlex.split(line[len("    $ jobhost ") :]), output))
    return found


@pytest.mark.parametrize(
    "where,args,output", next_examples(), ids=[" ".join(a[1:3]) for _, a, _ in next_examples()]
)
def test_every_next_example_prints_what_the_manual_says(
    where: str, args: list[str], output: list[str]
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("JOBHOST_")}
    result = subprocess.run(
        [sys.executable, "-m", "jobhost", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == output, f"{where}: jobhost {' '.join(args)}"


def test_the_daylight_saving_examples_are_checked() -> None:
    assert len([e for e in next_examples() if e[0] == "semantics.md"]) >= 5


def _promql(expression: str, where: str) -> None:
    """Every metric ``expression`` names is exported, with the labels and outcomes it selects."""
    series = prometheus_series_names()
    exposition = prometheus_exposition()
    for metric in re.findall(r"\bjobhost_\w+", expression):
        assert metric in series, f"{where}: {metric} is not exported"
    for selector in re.findall(r"\bjobhost_\w+\{([^}]*)\}", expression):
        for label, value in re.findall(r'(\w+)=~?"([^"]*)"', selector):
            exported = "job" if label == "exported_job" else label
            assert f'{exported}="' in exposition, f"{where}: no label {label}"
            if label == "outcome":
                assert set(value.split("|")) <= set(OUTCOMES), value


def alert_rules() -> list[dict[str, Any]]:
    yaml = importlib.import_module("yaml")
    return [
        rule for group in yaml.safe_load(RULES.read_text())["groups"] for rule in group["rules"]
    ]


def test_the_alert_rules_name_only_exported_metrics_labels_and_outcomes() -> None:
    rules = alert_rules()
    alerts = " ".join(rule["alert"] for rule in rules)
    for topic in ("Failed", "Overdue", "NoLiveHost", "Behind", "ClockSkew", "Stuck", "Store"):
        assert topic in alerts, f"no alert rule about {topic}"
    for rule in rules:
        _promql(rule["expr"], rule["alert"])


def test_the_dashboard_names_only_exported_metrics_labels_and_outcomes() -> None:
    checked = 0
    for panel in json.loads(DASHBOARD.read_text())["panels"]:
        for target in panel.get("targets", []):
            _promql(target["expr"], f"panel {panel['title']}")
            checked += 1
    assert checked >= 10, f"only {checked} dashboard queries were checked"


def test_every_alert_has_its_section_in_the_manual_and_the_manual_includes_the_files() -> None:
    text = page("observability.md")
    headings = set(re.findall(r"^#+ (\S+)$", text, flags=re.MULTILINE))
    for rule in alert_rules():
        assert rule["alert"] in headings, f"observability.md has no section {rule['alert']}"
        anchor = rule["annotations"]["runbook"].split("#", 1)[1]
        assert anchor == rule["alert"].lower()
    for path in ("deploy/prometheus/jobhost-rules.yaml", "deploy/grafana/jobhost.json"):
        assert f"({'../../' + path})" in text, f"observability.md does not link {path}"
    # The rules live in their file: the manual links it rather than keeping a copy.
    assert not fenced_blocks(text, "yaml") or all(
        "groups:" not in block for block in fenced_blocks(text, "yaml")
    )


def test_the_settings_example_and_module_tables_parse() -> None:
    import tomllib

    text = page("settings.md")
    example = text.split("A complete `jobhost.toml`:\n\n", 1)[1].split("\n\n## ", 1)[0]
    data = tomllib.loads("\n".join(line.removeprefix("    ") for line in example.splitlines()))
    Settings.model_validate({k: v for k, v in data.items() if k != "modules"})
    assert set(data["modules"]) == {"jobhost", "files", "http"}


@pytest.fixture
def example_module(tmp_path: Path) -> Path:
    """The files of writing-a-module.md, written out as a project."""
    blocks = [b for b in fenced_blocks(page("writing-a-module.md"), "python") if "# file: " in b]
    assert len(blocks) >= 2
    for block in blocks:
        first, _, body = block.partition("\n")
        target = tmp_path / first.removeprefix("# file: ").strip()
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(body)
    (tmp_path / "jobhost_exports" / "__init__.py").write_text("")
    (tmp_path / "pytest.ini").write_text("[pytest]\nfilterwarnings = error\n")
    return tmp_path


def test_the_example_module_loads_into_a_valid_catalog(
    example_module: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(example_module))
    settings = Settings.model_validate(
        {
            "plugins": ["jobhost_exports.plugin"],
            "modules": {"exports": {"batch_size": 10, "failures_file": str(example_module / "f")}},
        }
    )
    catalog = build_catalog(settings, environ={"JOBHOST_LOAD_PLUGINS": ""})
    assert catalog.ok, [problem.line() for problem in catalog.problems]
    spec = catalog.get("exports.partner-orders")
    assert spec.enabled
    assert [sink.name for sink in catalog.audit_sinks] == ["exports-failures-file"]
    sys.modules.pop("jobhost_exports.plugin", None)
    sys.modules.pop("jobhost_exports", None)


def test_the_example_module_tests_pass(example_module: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("JOBHOST_")}
    env["PYTHONPATH"] = str(example_module)
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
        cwd=example_module,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "4 passed" in result.stdout


# -- the --json shapes ---------------------------------------------------------------------------


def _keys(value: object) -> set[str]:
    if isinstance(value, dict):
        return set(value) | {k for v in value.values() for k in _keys(v)}
    if isinstance(value, list):
        return {k for v in value for k in _keys(v)}
    return set()


@pytest.fixture(scope="module")
def sqlite_store(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    directory = tmp_path_factory.mktemp("store")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JOBHOST_", "OTEL_"))}
    env["JOBHOST_DATABASE_URL"] = f"sqlite:///{directory}/jobhost.db"
    subprocess.run(
        [sys.executable, "-m", "jobhost", "db", "upgrade"],
        env=env,
        check=True,
        timeout=60,
        capture_output=True,
    )
    # Read commands show what a host synced: sync the built-in catalog as a starting host would.
    settings = Settings(database_url=env["JOBHOST_DATABASE_URL"])
    jobs = build_catalog(settings, environ=env).jobs
    engine = create_store_engine(settings.database_url)
    try:
        with engine.begin() as connection:
            sync_schedules(connection, desired_schedules(jobs), datetime.now(UTC))
    finally:
        engine.dispose()
    return env


@pytest.mark.parametrize(
    "args",
    [
        ["validate", "--json"],
        ["next", "--cron", "0 3 * * *", "--json"],
        ["report", "--json"],
        ["history", "jobhost.run-retention", "--json"],
        ["health", "--json", "--no-hosts"],
        ["plan", "--json"],
        ["trigger", "jobhost.run-retention", "--no-wait", "--json"],
    ],
    ids=lambda a: a[0],
)
def test_every_json_key_a_command_prints_is_documented(
    args: list[str], sqlite_store: dict[str, str]
) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "jobhost", *args],
        env=sqlite_store,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.stdout.strip(), result.stderr
    body = _command_section(args[0])
    for key in sorted(_keys(json.loads(result.stdout))):
        assert f'"{key}"' in body, f"jobhost {args[0]} --json prints {key!r}; commands.md lacks it"
