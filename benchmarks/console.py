"""The operator's console at scale: ``python benchmarks/console.py [sqlite|postgres ...]``.

Builds a catalog of ``JOBS`` jobs and a ledger of ``ROWS`` rows (bulk-inserted: executemany in
one transaction on SQLite, COPY on PostgreSQL; PostgreSQL from ``JOBHOST_TEST_POSTGRES_URL``,
in a schema of its own, dropped afterwards), then prints how long each operator read takes:

- ``report``, ``health`` and ``report --job``, and one refresh of the gauges ``/metrics``
  serves (jobs by status, overdue, live hosts, skew): in this process (store reads and report
  building), and as the whole ``jobhost`` command (start-up and the 10,000-job catalog too;
  ``jobhost validate``, which does only those, is printed as the baseline);
- ``GET /report``: over HTTP from the ASGI application (``jobhost serve``'s, which builds the
  report exactly as ``jobhost run``'s does);
- ``jobhost failures`` (in process: newest 50, a search by error text that matches nothing, so
  it looks as far as it may, one job's) and the Failures page's chart of the whole installation
  (runs by outcome over 24 hours and 30 days, counted by the database);
- the dashboard's overview page (its summary read each time, no cache) and one job page with
  its 7-day timeline;
- ``/metrics`` of a host whose every job has run (``metrics_job_label``): one render of the
  exposition, as prometheus_client writes it and as jobhost does, and one scrape (which answers
  the exposition kept from the last render);
- with ``CONSOLE_LAG=1``: a real ``jobhost run`` with ``http_listen`` over the 10,000 jobs, its
  p99 schedule lag (start minus occurrence of its scheduled runs, from the ledger) over
  ``LAG_WINDOW`` seconds with nobody looking, then with 10 viewers each polling the overview
  every second (the occurrences due in each window, read once the late ones have started).

- every read-only command an operator types (``report``, ``report --json``, ``report --job``,
  ``history``, ``failures``, ``logs``, ``next``, ``jobs show``, ...), as the whole ``jobhost``
  command: the median of ``CONSOLE_READ_RUNS`` beside its budget (dashboard.md, "Budgets").
  ``python benchmarks/console.py seed sqlite DIR`` then ``... reads DIR/jobhost.toml NAME``
  measures them alone, on a store kept between runs.

``CONSOLE_ONLY=health,--job`` measures only the figures whose names contain one of the words.
Last, the wall time and peak memory of one ``jobhost health --no-hosts`` and one
``jobhost db check --full`` (the full audit of every row).

Each figure is the best of ``REPEAT`` runs after one warm-up, as wall-clock seconds and as CPU
seconds of this process (or of the ``jobhost`` child): on a shared machine the wall clock
measures the neighbours too, the CPU time mostly what the code costs. PostgreSQL's own work is
in the wall-clock column only.
"""

from __future__ import annotations

import compileall
import os
import resource
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace

from opentelemetry.exporter.prometheus import PrometheusMetricReader
from prometheus_client import CollectorRegistry, generate_latest
from sqlalchemy import bindparam, create_engine, func, select, text, update
from sqlalchemy.engine import Engine, make_url

from jobhost.catalog import Catalog, build_catalog
from jobhost.config import Settings, load_settings
from jobhost.envelope.reporting import configure_telemetry
from jobhost.operations.failures import FailureQuery, read_failures
from jobhost.operations.gauges import read_figures, register_gauges
from jobhost.operations.health import check_health
from jobhost.operations.report import JobFilter, build_report, overview_page, read_summary
from jobhost.rules import desired_schedules
from jobhost.store import create_store_engine, reading, upgrade
from jobhost.store.outcome_counts import outcome_counts
from jobhost.store.registry import sync_schedules
from jobhost.store.schema import runs, schedules
from jobhost.web import WebServer, create_app, store_endpoints
from jobhost.web.console.pages import Console
from jobhost.web.endpoints import ExpositionCache, exposition

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = str(ROOT / "tests" / "plugins" / "sample_jobs.py")
JOBS = int(os.environ.get("CONSOLE_JOBS", "10000"))
ROWS = int(os.environ.get("CONSOLE_ROWS", "1000000"))
REPEAT = 3
_COLUMNS = (
    "id, job_name, occurrence, attempt, source, outcome, host_id, fencing_token, "
    "queued_at, started_at, finished_at, error_type, error_message"
)


def main(backends: list[str]) -> None:
    print(f"{JOBS} jobs, {ROWS} ledger rows; best of {REPEAT} (seconds)")
    for backend in backends or ["sqlite", "postgres"]:
        with tempfile.TemporaryDirectory() as directory, _store(backend, directory) as url:
            _measure(backend, url, Path(directory))


def _measure(backend: str, url: str, directory: Path) -> None:
    config = _write_config(directory, url)
    settings = load_settings(config)
    catalog = build_catalog(settings, environ={"JOBHOST_LOAD_PLUGINS": ""})
    engine = create_store_engine(url)
    try:
        upgrade(engine)
        seeded = _seed(engine, catalog.jobs)
        one = sorted(catalog.jobs)[JOBS // 2]
        env = {k: v for k, v in os.environ.items() if not k.startswith(("JOBHOST_", "OTEL_"))}
        env["JOBHOST_LOAD_PLUGINS"] = ""
        command = [sys.executable, "-m", "jobhost", "--config", str(config)]
        figures = {
            "report (in process)": lambda: build_report(settings, catalog, engine),
            "overview summary (in process)": lambda: read_summary(settings, catalog, engine),
            "overview page, failing (in process)": lambda: overview_page(
                engine,
                read_summary(settings, catalog, engine),
                JobFilter(statuses=["failing"], sort="state"),
                1,
                50,
            ),
            "gauges: one /metrics refresh": lambda: read_figures(settings, catalog, engine),
            "failures, newest 50 (in process)": lambda: read_failures(engine, FailureQuery()),
            "failures --grep 503 (in process)": lambda: read_failures(
                engine, FailureQuery(text="503")
            ),
            "failures --job NAME (in process)": lambda: read_failures(
                engine, FailureQuery(job=one)
            ),
            "failures chart, all jobs, 24h": lambda: _chart(engine, timedelta(days=1), 24),
            "failures chart, all jobs, 30d": lambda: _chart(engine, timedelta(days=30), 30),
            "jobhost failures": lambda: _command([*command, "failures"], env),
            "health (in process)": lambda: check_health(settings, catalog, engine, hosts=False),
            "report --job (in process)": lambda: build_report(settings, catalog, engine, job=one),
            "jobhost --version": lambda: _command([*command, "--version"], env),
            "jobhost --help": lambda: _command([*command, "--help"], env),
            "jobhost changes --job NAME": lambda: _command(
                [*command, "changes", "--job", one], env
            ),
            # The floor under every command: start-up and loading the 10,000-job catalog.
            "jobhost validate (baseline)": lambda: _command([*command, "validate"], env),
            "jobhost report --json": lambda: _command([*command, "report", "--json"], env),
            "jobhost report": lambda: _command([*command, "report"], env),
            "jobhost health --no-hosts": lambda: _command([*command, "health", "--no-hosts"], env),
            "jobhost report --job NAME": lambda: _command([*command, "report", "--job", one], env),
        }
        only = [part for part in os.environ.get("CONSOLE_ONLY", "").split(",") if part]
        chosen = {k: v for k, v in figures.items() if not only or any(p in k for p in only)}
        results = {name: _best(call) for name, call in chosen.items()}
        if not only or "http" in only:
            results |= _http(settings, catalog, engine, one)
        if not only or "metrics" in only:
            results |= _metrics(settings, catalog, engine)
        print(f"\n{backend}: seeded {seeded} rows in {_seconds(engine, seeded):s}")
        print(f"  {'':<34} {'wall':>7} {'cpu':>7}")
        for name, (wall, cpu) in results.items():
            print(f"  {name:<34} {wall:7.3f} {cpu:7.3f}")
        if not only or "peak" in only:
            # Peak memory of the whole process, once each: the health check's must not follow the
            # ledger; the full audit streams, so neither should its.
            print(f"  {'':<34} {'wall':>7} {'peak MB':>7}")
            for name, args in (
                ("jobhost health --no-hosts", ["health", "--no-hosts"]),
                ("jobhost db check --full", ["db", "check", "--full"]),
            ):
                wall, peak = _peak([*command, *args], env)
                print(f"  {name:<34} {wall:7.3f} {peak:7.0f}")
        if os.environ.get("CONSOLE_LAG") == "1":
            _lag(command, env, directory, url, engine)
        if not only or "reads" in only:
            _read_commands(command, env, one, url)
    finally:
        engine.dispose()


# -- read-only commands, whole process (issue 19's targets) -----------------------------------

# (label, arguments, target seconds): each reads the store alone, loading no plugin. {one} is
# a job of the catalog, {run} one of its failed runs.
_READS: list[tuple[str, list[str], float]] = [
    ("--version", ["--version"], 0.3),
    ("--help", ["--help"], 0.3),
    ("report", ["report"], 1.0),
    ("report --json", ["report", "--json"], 1.0),
    ("report --all", ["report", "--all"], 1.0),
    ("report --job NAME", ["report", "--job", "{one}"], 0.5),
    ("history NAME", ["history", "{one}"], 0.5),
    ("failures", ["failures"], 0.5),
    ("failures --job NAME", ["failures", "--job", "{one}"], 0.5),
    ("logs RUN_ID", ["logs", "{run}"], 0.5),
    ("next NAME", ["next", "{one}"], 0.5),
    ("jobs show NAME", ["jobs", "show", "{one}"], 0.5),
    ("pause NAME", ["pause", "{one}", "--reason", "bench"], 0.5),
    ("resume NAME", ["resume", "{one}", "--reason", "bench"], 0.5),
    ("trigger NAME --no-wait", ["trigger", "{one}", "--no-wait"], 0.5),
    ("health --no-hosts", ["health", "--no-hosts"], 1.0),
]
_READ_RUNS = int(os.environ.get("CONSOLE_READ_RUNS", "5"))


def _read_commands(command: list[str], env: dict[str, str], one: str, url: str) -> None:
    """The median whole-process wall time of each read-only command beside its target, with its
    median CPU seconds (on a shared machine the wall clock measures the neighbours too), and the
    health check's peak memory (target 150 MB)."""
    run = _failed_run(url, one)
    # As an installed host has them (pip compiles at install): with PYTHONDONTWRITEBYTECODE
    # set, a checkout would otherwise compile its sources again in every command.
    for package in ("jobhost", "contracts"):
        compileall.compile_dir(ROOT / package, quiet=1)
    load = os.getloadavg()[0]
    print(f"  read-only commands, whole process, median of {_READ_RUNS}   wall     cpu   (target)")
    print(f"  (load average {load:.2f} at the start: above 1 on two cores, wall includes waiting)")
    for label, args, target in _READS:
        argv = [*command, *(arg.replace("{one}", one).replace("{run}", run) for arg in args)]
        walls, cpus = [], []
        for _ in range(_READ_RUNS + 1):
            started, used = time.perf_counter(), _cpu()
            _command(argv, env)
            walls.append(time.perf_counter() - started)
            cpus.append(_cpu() - used)
        wall, cpu = _median(walls[1:]), _median(cpus[1:])
        mark = "ok" if wall <= target else "OVER"
        print(f"  jobhost {label:<26} {wall:7.3f} {cpu:7.3f}   (<= {target:.1f} s {mark})")
    _, peak = _peak([*command, "health", "--no-hosts"], env)
    mark = "ok" if peak <= 150 else "OVER"
    print(f"  jobhost health --no-hosts peak {peak:6.0f} MB (<= 150 MB {mark})")


def _median(values: list[float]) -> float:
    return sorted(values)[len(values) // 2]


def _failed_run(url: str, name: str) -> str:
    """The newest failed run of job ``name`` (``jobhost logs`` reads its lines)."""
    engine = create_store_engine(url)
    query = (
        select(runs.c.id)
        .where(runs.c.job_name == name, runs.c.outcome == "failed")
        .order_by(runs.c.finished_at.desc())
        .limit(1)
    )
    try:
        with reading(engine) as connection:
            return str(connection.execute(query).scalar_one())
    finally:
        engine.dispose()


def reads_only(config: str, one: str) -> None:
    """``python benchmarks/console.py reads CONFIG NAME``: the read-only commands alone, on a
    store ``seed`` made (NAME: a job of it), so two checkouts can be timed on one store."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JOBHOST_", "OTEL_"))}
    env["JOBHOST_LOAD_PLUGINS"] = ""
    print(f"{config}: load {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f}")
    url = load_settings(config).database_url
    _read_commands([sys.executable, "-m", "jobhost", "--config", config], env, one, url)


def seed_only(backend: str, directory: str) -> None:
    """``python benchmarks/console.py seed sqlite DIR``: seed a store in DIR (SQLite) and print
    the configuration, for timing commands by hand (``/usr/bin/time -v``); PostgreSQL keeps its
    schema (named in the printed URL) until dropped."""
    path = Path(directory)
    path.mkdir(parents=True, exist_ok=True)
    if backend == "sqlite":
        url = f"sqlite:///{path}/store.db"
    else:
        base = make_url(os.environ["JOBHOST_TEST_POSTGRES_URL"]).set(
            drivername="postgresql+psycopg"
        )
        schema = f"bench_{uuid.uuid4().hex[:12]}"
        admin = create_engine(base, isolation_level="AUTOCOMMIT")
        with admin.connect() as connection:
            connection.execute(text(f'CREATE SCHEMA "{schema}"'))
        admin.dispose()
        url = base.update_query_dict({"options": f"-csearch_path={schema}"}).render_as_string(
            hide_password=False
        )
    config = _write_config(path, url)
    catalog = build_catalog(load_settings(config), environ={"JOBHOST_LOAD_PLUGINS": ""})
    engine = create_store_engine(url)
    try:
        upgrade(engine)
        _seed(engine, catalog.jobs)
    finally:
        engine.dispose()
    print(f"config {config}; one job: {sorted(catalog.jobs)[JOBS // 2]}")


_SEED_TIMES: dict[int, float] = {}


def _chart(engine: Engine, span: timedelta, slices: int) -> list[dict[str, int]]:
    """The Failures page's runs-by-outcome chart of the whole installation."""
    end = datetime.now(UTC)
    with reading(engine) as connection:
        return outcome_counts(connection, end - span, end, slices)


def _seconds(_engine: Engine, rows: int) -> str:
    return f"{_SEED_TIMES.get(rows, 0.0):.1f}s"


def _http(
    settings: Settings, catalog: Catalog, engine: Engine, one: str
) -> dict[str, tuple[float, float]]:
    # The overview's cache off: each request reads the summary, as the first viewer after a
    # few seconds does.
    console = Console(settings, catalog, engine, allow_actions=False, overview_seconds=0)
    app = create_app(store_endpoints(settings, catalog, engine), pages=console.routes())
    server = WebServer(("127.0.0.1", 0), app)
    server.start()
    base = f"http://127.0.0.1:{server.address[1]}"
    try:
        only = os.environ.get("CONSOLE_ONLY", "")
        pages = {} if only else {"GET /report": "/report"}
        if os.environ.get("CONSOLE_PAGES", "1") == "1":
            pages["GET / (overview, failing first)"] = "/?state=failing&sort=state"
            pages["GET / (overview, page 100)"] = "/?page=100"
            pages["GET /jobs/NAME?range=7d"] = f"/jobs/{one}?range=7d"
        return {name: _best(lambda path=path: _get(base + path)) for name, path in pages.items()}
    finally:
        server.stop()


def _metrics(
    settings: Settings, catalog: Catalog, engine: Engine
) -> dict[str, tuple[float, float]]:
    """A host's metrics once every job has run: per-job counters and histograms, the gauges."""
    registry = CollectorRegistry(auto_describe=True)
    telemetry = configure_telemetry(
        extra_readers=[PrometheusMetricReader(registry=registry)], job_label=True
    )
    for index, name in enumerate(sorted(catalog.jobs)):
        telemetry.runs.add(1, {"job": name, "outcome": "succeeded"})
        if index % 50 == 0:
            telemetry.runs.add(1, {"job": name, "outcome": "failed"})
        telemetry.duration.record(2.5, {"job": name})
        telemetry.lag.record(0.3, {"job": name})
    register_gauges(telemetry.meter, _GaugeHost(settings, catalog, engine))
    scrape = ExpositionCache(lambda: exposition(registry), 3600)
    figures = {
        "/metrics render (prometheus_client)": _best(lambda: generate_latest(registry)),
        "/metrics render (jobhost)": _best(lambda: exposition(registry)),
        "/metrics scrape (kept render)": _best(scrape),
    }
    lines = exposition(registry).count(b"\n")
    print(f"  /metrics at {len(catalog.jobs)} jobs: {lines} lines")
    telemetry.shutdown()
    return figures


class _GaugeHost:
    host_id = "bench-host"
    clock = None

    def __init__(self, settings: Settings, catalog: Catalog, engine: Engine) -> None:
        self.settings, self.catalog, self.engine = settings, catalog, engine
        self.status = SimpleNamespace(store_ok=True, stuck=0)


LAG_WINDOW = int(os.environ.get("LAG_WINDOW", "60"))
LAG_SETTLE = 20
"""Seconds after a window before its runs are read: the late ones have started by then."""
VIEWERS = 10


def _lag(
    command: list[str], env: dict[str, str], directory: Path, url: str, engine: Engine
) -> None:
    """p99 schedule lag of a real host with 0, then 10 viewers polling its overview."""
    port = _free_port()
    config = _write_config(directory, url, extra=[f'http_listen = "127.0.0.1:{port}"'])
    log = (directory / "host.log").open("w")
    host = subprocess.Popen([*command[:4], str(config), "run"], env=env, stdout=log, stderr=log)
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_healthy(base + "/healthz", 300)
        time.sleep(LAG_WINDOW / 2)  # the start's catch-up settles
        print(f"  schedule lag of jobhost run, {LAG_WINDOW}s each  p50      p99      max   runs")
        for viewers in (0, VIEWERS):
            lags, answers = _window(engine, base, viewers)
            p50, p99 = _percentile(lags, 50), _percentile(lags, 99)
            seen = f"; viewers: {_answers(answers)}" if viewers else ""
            print(
                f"  {viewers:>2} viewers polling /             {p50:7.3f}  {p99:7.3f}  "
                f"{max(lags, default=0.0):7.3f}  {len(lags)}{seen}"
            )
    finally:
        host.terminate()
        host.wait(60)
        log.close()
        if os.environ.get("LAG_LOG") == "1":
            print((directory / "host.log").read_text()[-3000:])


def _window(engine: Engine, base: str, viewers: int) -> tuple[list[float], list[tuple[int, float]]]:
    answers: list[tuple[int, float]] = []
    stop = threading.Event()

    def view() -> None:
        while not stop.is_set():
            started = time.perf_counter()
            try:
                with urllib.request.urlopen(base + "/", timeout=30) as response:
                    response.read()
                    status = response.status
            except urllib.error.HTTPError as error:
                status = error.code
            answers.append((status, time.perf_counter() - started))
            stop.wait(1.0)

    threads = [threading.Thread(target=view, daemon=True) for _ in range(viewers)]
    _await_due_instant(engine)
    since = datetime.now(UTC)
    for thread in threads:
        thread.start()
    time.sleep(LAG_WINDOW)
    stop.set()
    for thread in threads:
        thread.join(60)
    until = datetime.now(UTC)
    # The occurrences due in the window, however late they started: a loop the viewers held
    # up starts them after it, and counting by start would leave them out of the figure.
    time.sleep(LAG_SETTLE)
    query = select(runs.c.occurrence, runs.c.started_at).where(
        runs.c.source == "schedule",
        runs.c.occurrence >= since,
        runs.c.occurrence < until,
        runs.c.started_at.is_not(None),
    )
    with engine.connect() as connection:
        found = connection.execute(query).all()
    return [(started - occurrence).total_seconds() for occurrence, started in found], answers


def _await_due_instant(engine: Engine) -> None:
    """Sleep until the next instant at which some job is due is half a window away, so that
    each window holds one such instant in its middle. The catalog's crons fire at whole minutes,
    but not at every minute (none at a minute divisible by 3), and its intervals not before five
    minutes after the seed: a window placed by the clock alone may hold no scheduled run."""
    soon = datetime.now(UTC) + timedelta(seconds=LAG_WINDOW / 2 + 1)
    query = select(func.min(schedules.c.next_occurrence)).where(
        schedules.c.next_occurrence >= soon, schedules.c.paused.is_(False)
    )
    with engine.connect() as connection:
        due = connection.execute(query).scalar_one()
    if due is not None:
        time.sleep(max((due - datetime.now(UTC)).total_seconds() - LAG_WINDOW / 2, 0.0))


def _answers(answers: list[tuple[int, float]]) -> str:
    ok = sorted(took for status, took in answers if status == 200)
    busy = sum(1 for status, _ in answers if status == 503)
    median = ok[len(ok) // 2] if ok else 0.0
    return f"{len(ok)} pages (median {median:.3f}s, p99 {_percentile(ok, 99):.3f}s), {busy} x 503"


def _percentile(values: list[float], percent: int) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(percent / 100 * (len(ordered) - 1)))]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _wait_healthy(url: str, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        time.sleep(1)
    raise SystemExit(f"the host did not answer {url} within {seconds}s")


def _get(url: str) -> None:
    with urllib.request.urlopen(url, timeout=60) as response:
        assert response.status == 200, url
        response.read()


# The process's own high-water mark (VmHWM, of its memory since exec). Not getrusage's
# ru_maxrss: Linux carries that over exec from the forking parent, so a child of this
# benchmark (which holds the seeded catalog) would report the parent's size.
_PEAK = (
    "import atexit, sys; atexit.register(lambda: sys.stderr.write('peak-kb %s\\n' % next("
    "line.split()[1] for line in open('/proc/self/status') if line.startswith('VmHWM')))); "
    "sys.argv[0] = 'jobhost'; from jobhost.cli import main; main()"
)


def _peak(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, peak resident MB) of one ``jobhost`` process."""
    started = time.perf_counter()
    done = subprocess.run(
        [argv[0], "-c", _PEAK, *argv[3:]], env=env, capture_output=True, text=True, check=False
    )
    wall = time.perf_counter() - started
    assert done.returncode in {0, 1}, done.stderr
    kilobytes = int(done.stderr.rsplit("peak-kb ", 1)[1].split()[0])
    return wall, kilobytes / 1024


def _command(argv: list[str], env: dict[str, str]) -> None:
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode in {0, 1}, done.stderr


def _best(call: Callable[[], object]) -> tuple[float, float]:
    """(wall, cpu) seconds: the best of :data:`REPEAT` after a warm-up."""
    call()
    wall = cpu = float("inf")
    for _ in range(REPEAT):
        started, used = time.perf_counter(), _cpu()
        call()
        wall = min(wall, time.perf_counter() - started)
        cpu = min(cpu, _cpu() - used)
    return wall, cpu


def _cpu() -> float:
    """CPU seconds of this process and of its finished children."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def _write_config(directory: Path, url: str, extra: list[str] | None = None) -> Path:
    zones = ["UTC", "Europe/Berlin", "America/New_York", "Asia/Kolkata"]
    lines = [f'database_url = "{url}"', f'plugins = ["{SAMPLE}"]', *(extra or [])]
    lines.append("[modules.sample]")
    for index in range(JOBS):
        lines.append("[[modules.sample.jobs]]")
        lines.append(f'name = "sample.job-{index:05d}"')
        if index % 3 == 0:
            lines.append(f'interval = "{5 + index % 55}m"')
        else:
            lines.append(f'cron = "{index % 60} * * * *"')
            lines.append(f'timezone = "{zones[index % len(zones)]}"')
        if index % 100 == 0:
            lines.append("critical = true")
    path = directory / ("jobhost-host.toml" if extra else "jobhost.toml")
    path.write_text("\n".join(lines) + "\n")
    return path


def _seed(engine: Engine, jobs: dict[str, object]) -> int:
    now = datetime.now(UTC)
    with engine.begin() as connection:
        sync_schedules(connection, desired_schedules(jobs), now)  # type: ignore[arg-type]
    started = time.perf_counter()
    per_job = ROWS // len(jobs)
    summaries: dict[str, dict[str, object]] = {}
    rows = _summarising(_rows(sorted(jobs), per_job, now), summaries)
    if engine.dialect.name == "postgresql":
        raw = engine.raw_connection()
        try:
            with raw.cursor() as cursor:
                # Seeding a million rows is one statement: longer than the store's own limit.
                cursor.execute("SET statement_timeout = 0")
            with raw.cursor() as cursor, cursor.copy(f"COPY runs ({_COLUMNS}) FROM STDIN") as copy:  # type: ignore[attr-defined]
                for row in rows:
                    copy.write_row(row)
            raw.commit()
        finally:
            raw.close()
    else:
        raw = engine.raw_connection()
        try:
            cursor = raw.cursor()
            cursor.execute("BEGIN")
            cursor.executemany(
                f"INSERT INTO runs ({_COLUMNS}) VALUES ({', '.join('?' * 13)})",
                (tuple(_sqlite(value) for value in row) for row in rows),
            )
            cursor.execute("COMMIT")
        finally:
            raw.close()
    # Each job's last attempt and last success on its schedule row, as recording writes them.
    with engine.begin() as connection:
        connection.execute(
            update(schedules)
            .where(schedules.c.job_name == bindparam("b_job"))
            .values(
                last_run_id=bindparam("b_run"),
                last_outcome=bindparam("b_outcome"),
                last_started_at=bindparam("b_started", type_=schedules.c.last_started_at.type),
                last_finished_at=bindparam("b_finished", type_=schedules.c.last_finished_at.type),
                last_error=bindparam("b_error"),
                last_success_at=bindparam("b_success", type_=schedules.c.last_success_at.type),
            ),
            list(summaries.values()),
        )
    if engine.dialect.name == "postgresql":
        # As autovacuum leaves a store that has been running: the planner's statistics, and a
        # visibility map that lets an index-only scan skip the table.
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
            connection.execute(text("SET statement_timeout = 0"))
            connection.execute(text("VACUUM ANALYZE runs"))
            connection.execute(text("VACUUM ANALYZE schedules"))
    _SEED_TIMES[per_job * len(jobs)] = time.perf_counter() - started
    return per_job * len(jobs)


def _summarising(
    rows: Iterator[tuple[object, ...]], summaries: dict[str, dict[str, object]]
) -> Iterator[tuple[object, ...]]:
    """``rows``, noting each job's newest attempt and newest success (newest rows come first)."""
    for row in rows:
        run_id, name, _occurrence, _attempt, _source, outcome = row[:6]
        started, finished, message = row[9], row[10], row[12]
        summary = summaries.get(str(name))
        if outcome != "missed" and summary is None:
            summary = summaries[str(name)] = {
                "b_job": name,
                "b_run": run_id,
                "b_outcome": outcome,
                "b_started": started,
                "b_finished": finished,
                "b_error": message,
                "b_success": None,
            }
        if outcome == "succeeded" and summary is not None and summary["b_success"] is None:
            summary["b_success"] = finished
        yield row


def _rows(names: list[str], per_job: int, now: datetime) -> Iterator[tuple[object, ...]]:
    for number, name in enumerate(names):
        for index in range(per_job):
            occurrence = now - timedelta(minutes=15 * (index + 1) + number % 15)
            kind = (number + index) % 50
            outcome = "failed" if kind == 0 else "missed" if kind == 1 else "succeeded"
            if number % 97 == 0 and index == 0:
                outcome = "failed"
            attempt = 0 if outcome == "missed" else 1
            started = None if outcome == "missed" else occurrence + timedelta(seconds=1)
            finished = None if started is None else started + timedelta(seconds=2 + index % 7)
            failed = outcome == "failed"
            error = ("RuntimeError", "disk full on /var/data") if failed else (None, None)
            yield (
                uuid.uuid4().hex,
                name,
                occurrence,
                attempt,
                "schedule",
                outcome,
                "bench-host",
                index,
                started or occurrence,
                started,
                finished,
                *error,
            )


def _sqlite(value: object) -> object:
    if isinstance(value, datetime):
        return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
    return value


@contextmanager
def _store(backend: str, directory: str) -> Iterator[str]:
    if backend == "sqlite":
        yield f"sqlite:///{directory}/store.db"
        return
    base_url = os.environ.get("JOBHOST_TEST_POSTGRES_URL")
    if not base_url:
        raise SystemExit("set JOBHOST_TEST_POSTGRES_URL for the PostgreSQL figures")
    base = make_url(base_url).set(drivername="postgresql+psycopg")
    schema = f"bench_{uuid.uuid4().hex[:12]}"
    admin = create_engine(base, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f'CREATE SCHEMA "{schema}"'))
    try:
        url = base.update_query_dict({"options": f"-csearch_path={schema}"})
        yield url.render_as_string(hide_password=False)
    finally:
        with admin.connect() as connection:
            connection.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


if __name__ == "__main__":
    if sys.argv[1:2] == ["seed"]:
        seed_only(sys.argv[2], sys.argv[3])
    elif sys.argv[1:2] == ["reads"]:
        reads_only(sys.argv[2], sys.argv[3])
    else:
        main(sys.argv[1:])
