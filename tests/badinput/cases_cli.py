"""CLI misuse: unknown commands, options, jobs and values, and commands run without a store.

Usage errors exit 2 with click's message or the closest job names; a command given no store
exits 3 and says where it looked. None of them changes the store.
"""

from __future__ import annotations

from tests.badinput.corpus_support import Case

_NO_STORE = ("no store at", "--config PATH or JOBHOST_CONFIG=PATH", "JOBHOST_DATABASE_URL=URL")


def _usage(case_id: str, args: tuple[str, ...], *says: str) -> Case:
    return Case(f"cli-{case_id}", args, 2, says)


def _no_store(args: tuple[str, ...]) -> Case:
    return Case(f"no-store-{args[0]}", args, 3, _NO_STORE, store=False)


CLI_CASES = [
    _usage("unknown-command", ("frobnicate",), "No such command 'frobnicate'"),
    _usage("unknown-option", ("report", "--frob"), "No such option '--frob'"),
    _usage("unknown-global-option", ("--frob", "report"), "No such option '--frob'"),
    _usage("trigger-without-name", ("trigger",), "Missing argument 'NAME'"),
    _usage(
        "trigger-unknown-job",
        ("trigger", "unruly.succed"),
        "unknown job 'unruly.succed'",
        "did you mean unruly.succeed",
    ),
    _usage("history-unknown-job", ("history", "unruly.nope"), "unknown job 'unruly.nope'"),
    _usage("history-limit-zero", ("history", "unruly.succeed", "--limit", "0"), "--limit"),
    _usage("history-limit-word", ("history", "unruly.succeed", "--limit", "all"), "--limit"),
    _usage(
        "history-outcome-bogus",
        ("history", "unruly.succeed", "--outcome", "exploded"),
        "--outcome",
        "'succeeded'",
    ),
    _usage("pause-without-reason", ("pause", "unruly.succeed"), "Missing option '--reason'"),
    _usage("pause-empty-reason", ("pause", "unruly.succeed", "--reason", ""), "must say why"),
    _usage("pause-blank-reason", ("pause", "unruly.succeed", "--reason", "  "), "must say why"),
    _usage(
        "pause-unknown-job", ("pause", "unruly.nope", "--reason", "x"), "unknown job 'unruly.nope'"
    ),
    _usage(
        "resume-unknown-job",
        ("resume", "unruly.nope", "--reason", "x"),
        "unknown job 'unruly.nope'",
    ),
    _usage("report-unknown-job", ("report", "--job", "unruly.nope"), "unknown job 'unruly.nope'"),
    _usage("next-unknown-job", ("next", "unruly.nope"), "unknown job 'unruly.nope'"),
    _usage("next-bad-cron", ("next", "--cron", "61 * * * *"), "minute"),
    _usage("next-bad-zone", ("next", "--cron", "0 * * * *", "--tz", "Mars/Base"), "Mars/Base"),
    _usage("next-count-zero", ("next", "unruly.succeed", "-n", "0"), "-n"),
    _usage("next-after-garbage", ("next", "unruly.succeed", "--after", "yesterday"), "--after"),
    _usage("next-nothing", ("next",), "NAME"),
    _usage(
        "trigger-timeout-negative", ("trigger", "unruly.succeed", "--timeout", "-1"), "--timeout"
    ),
    _usage("trigger-timeout-word", ("trigger", "unruly.succeed", "--timeout", "soon"), "--timeout"),
    # NaN passes a range check (every comparison is false) and would mean waiting forever.
    _usage("trigger-timeout-nan", ("trigger", "unruly.succeed", "--timeout", "nan"), "--timeout"),
    _usage("cancel-timeout-nan", ("cancel", "0" * 32, "--reason", "x", "--timeout", "NaN"), "nan"),
    # Bytes that are not UTF-8 (a Latin-1 terminal) reach Python as lone surrogates.
    _usage("history-name-not-utf8", ("history", "unruly.succ\udce9ed"), "is not UTF-8 text"),
    _usage("pause-name-not-utf8", ("pause", "unruly.\udcff", "--reason", "x"), "'unruly.\\udcff'"),
    _usage("logs-run-id-not-utf8", ("logs", "\udcff1234567"), "is not UTF-8 text"),
    _usage(
        "state-value-not-utf8",
        ("state", "unruly.succeed", "--set", "k=caf\udce9", "--reason", "x"),
        "is not UTF-8 text",
    ),
    _usage("failures-grep-not-utf8", ("failures", "--grep", "caf\udce9"), "is not UTF-8 text"),
    _usage("db-unknown", ("db", "frob"), "No such command 'frob'"),
    _usage("health-unknown-option", ("health", "--frob"), "No such option '--frob'"),
    _usage("plan-unknown-option", ("plan", "--frob"), "No such option '--frob'"),
    _no_store(("trigger", "jobhost.run-retention")),
    _no_store(("report",)),
    _no_store(("history", "jobhost.run-retention")),
    _no_store(("health",)),
    _no_store(("pause", "jobhost.run-retention", "--reason", "x")),
    _no_store(("resume", "jobhost.run-retention", "--reason", "x")),
    _no_store(("plan",)),
    Case(
        "trigger-invalid-declaration",
        ("trigger", "unruly.succeed"),
        3,
        ("unruly.succeed (module unruly) [cron-syntax]", "cannot run until these are fixed"),
        tables='[jobs."unruly.succeed"]\ncron = "61 * * * *"\n',
    ),
]
# The no-store cases load the retention job's declaration: it is what an operator would run.
CLI_CASES = [
    Case(c.id, c.args, c.code, c.says, store=False, env={"JOBHOST_LOAD_PLUGINS": "jobhost"})
    if c.id.startswith("no-store-")
    else c
    for c in CLI_CASES
]
