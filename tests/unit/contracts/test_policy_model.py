"""The policies are one model: every key of it reaches every surface that carries policies.

A field added to :class:`JobPolicies` fails :func:`test_every_policy_has_a_sample` until it is
given a sample here; then each surface is checked for it: the declaration's flat keys, the
stored declaration (written and read back), the policies ``jobs show`` answers with, a runtime
job's definition, and the entries of the bundled modules' sections.
"""

from __future__ import annotations

from datetime import timedelta
from enum import StrEnum
from typing import Any

import pytest
from jobhost_contracts import (
    POLICY_KEYS,
    SCHEDULE_KEYS,
    BackgroundJobDeclaration,
    DstGap,
    DstRepeat,
    JobPolicies,
    MisfirePolicy,
    OverlapPolicy,
    format_duration,
    policies_from,
    policy_values,
)
from jobhost_http.kind import http_kind
from jobhost_http.plugin import declaration as http_declaration
from jobhost_http.settings import HttpJobSettings, parse_jobs
from jobhost_publish.plugin import declaration as publish_declaration
from jobhost_publish.settings import PublishJobSettings

from jobhost.catalog import JobSpec
from jobhost.catalog.stored import StoredExecutor, declaration_text, stored_spec
from jobhost.catalog.validation import declared_parts, to_trigger
from jobhost.operations.jobs import declaration_json
from jobhost.runtime.definition import JobDefinition, SecretRule, build_spec, parse_definition

# A value unlike the default for every policy; cron and interval are used one at a time.
SAMPLE: dict[str, Any] = {
    "cron": "30 2 * * *",
    "interval": timedelta(hours=6),
    "timezone": "Europe/Berlin",
    "enabled": False,
    "critical": True,
    "misfire": MisfirePolicy.CATCH_UP,
    "catch_up_limit": 3,
    "misfire_grace": timedelta(minutes=2),
    "overlap": OverlapPolicy.ALLOW,
    "max_concurrent": 3,
    "timeout": timedelta(minutes=7),
    "lease": timedelta(seconds=90),
    "overdue_after": timedelta(hours=2),
    "max_attempts": 4,
    "backoff": timedelta(seconds=5),
    "backoff_max": timedelta(minutes=1),
    "jitter": 0.0,
    "retry_on": frozenset({"failed", "cancelled"}),
    "dst_gap": DstGap.SKIP,
    "dst_repeat": DstRepeat.BOTH,
    "concurrency_group": "reports",
}
DEFAULTS = policy_values(JobPolicies())
# Policies only a module's code declares: a runtime job's definition does not take them.
DECLARED_ONLY = {"lease", "overdue_after", "jitter", "retry_on"}
# Shown by the answer of `jobs show` beside its policies, as they are in effect.
SHOWN_APART = {
    "cron": "trigger",
    "interval": "trigger",
    "timezone": "timezone",
    "dst_gap": "dst_policy",
    "dst_repeat": "dst_policy",
    "enabled": "enabled",
    "critical": "critical",
    "concurrency_group": "concurrency_group",
}
USE_DEFAULT = object()


def test_every_policy_has_a_sample_unlike_its_default() -> None:
    assert list(SAMPLE) == list(POLICY_KEYS)
    assert [key for key in SAMPLE if SAMPLE[key] == DEFAULTS[key]] == []


@pytest.mark.parametrize("trigger", ["cron", "interval"])
def test_a_declaration_gives_back_every_policy_it_was_given(trigger: str) -> None:
    sample = _sample(trigger)
    assert policy_values(_declared(sample)) == sample


@pytest.mark.parametrize("trigger", ["cron", "interval"])
def test_every_policy_is_stored_and_read_back(trigger: str) -> None:
    sample = _sample(trigger)
    spec = _spec(_declared(sample))
    back = stored_spec("sample.job", "sample", declaration_text(spec))
    assert policy_values(back.declaration) == sample
    assert back.declaration == spec.declaration


def test_every_policy_is_in_the_answer_of_jobs_show() -> None:
    sample = _sample("cron")
    answer = declaration_json(_spec(_declared(sample)))
    assert answer["policies"] == {
        key: _shown(value) for key, value in sample.items() if key not in SHOWN_APART
    }
    assert set(SHOWN_APART.values()) <= set(answer)
    assert answer["trigger"] == "cron '30 2 * * *' (Europe/Berlin; dst_gap=skip, dst_repeat=both)"
    assert answer["timezone"] == "Europe/Berlin"
    assert answer["dst_policy"] == "dst_gap=skip, dst_repeat=both"
    assert (answer["enabled"], answer["critical"], answer["concurrency_group"]) == (
        False,
        True,
        "reports",
    )


@pytest.mark.parametrize(
    "variant",
    [
        # A critical job must be enabled; daylight-saving policies need a fixed-time cron job.
        {"interval": None, "enabled": USE_DEFAULT},
        {"cron": None, "critical": USE_DEFAULT, "dst_gap": USE_DEFAULT, "dst_repeat": USE_DEFAULT},
    ],
)
def test_a_runtime_definition_takes_every_policy_but_the_declared_only(
    variant: dict[str, object],
) -> None:
    taken = [key for key in POLICY_KEYS if key not in DECLARED_ONLY]
    assert set(taken) <= set(JobDefinition.model_fields)
    values = {
        key: DEFAULTS[key] if variant.get(key, SAMPLE[key]) is USE_DEFAULT else SAMPLE[key]
        for key in taken
        if key not in variant or variant[key] is not None
    }
    body = {
        "kind": "http",
        "settings": {"url": "http://127.0.0.1:9/ping"},
        **{key: _written(value) for key, value in values.items()},
    }
    definition = parse_definition(body)
    assert isinstance(definition, JobDefinition), definition
    spec = build_spec(
        "hooks.sample", definition, {"http": http_kind()}, {}, secrets=SecretRule("JOBHOST_")
    )
    assert isinstance(spec, JobSpec), spec
    given = policy_values(spec.declaration)
    assert {key: given[key] for key in values} == values
    stored = definition.model_dump(mode="json")
    assert stored == {**stored, **body}


@pytest.mark.parametrize("trigger", ["cron", "interval"])
def test_a_module_entry_takes_every_schedule_key(trigger: str) -> None:
    keys = {key for key in SCHEDULE_KEYS if key != ("interval" if trigger == "cron" else "cron")}
    entry = {key: _written(SAMPLE[key]) for key in keys}
    for model in (HttpJobSettings, PublishJobSettings):
        assert set(model.model_fields) >= SCHEDULE_KEYS, model
    http = http_declaration(parse_jobs({"jobs": [{"name": "a", "url": "http://x/", **entry}]})[0])
    publish = publish_declaration(
        PublishJobSettings.model_validate(
            {"name": "a", "broker": "nats", "subject": "a.b", **entry}
        )
    )
    for declared in (http, publish):
        given = policy_values(declared)
        assert {key: given[key] for key in keys} == {key: SAMPLE[key] for key in keys}


def test_a_policy_key_a_declaration_does_not_have_is_refused_by_name() -> None:
    with pytest.raises(TypeError, match="max_tries is not a policy; the policies are cron"):
        policies_from({"max_tries": 3})


# A declaration written before the policies were one model, as its schedule row holds it. (A
# policy added since loads with its default, and its key makes the text, and the catalog
# version, new.)
OLD_ROW = (
    '{"catch_up_limit":7,"configuration_source":"a","critical":false,"declared":{"dst_gap":'
    '"skip","dst_repeat":"both","expression":"30 2 * * *","interval":null,"kind":"cron",'
    '"source":"declaration","timezone":"Europe/Berlin"},"declared_enabled":false,'
    '"declared_group":"g","description":"","enabled":true,"format":1,"group":"g2","lease":180.0,'
    '"max_concurrent":3,"misfire":"catch_up","misfire_grace":null,"overdue_after":7200.0,'
    '"overlap":"allow","override":null,"plugin":"p","retry":{"backoff":5.0,"backoff_max":3600.0,'
    '"jitter":0.0,"max_attempts":4,"retry_on":["cancelled","failed"]},"timeout":null,"trigger":'
    '{"dst_gap":"skip","dst_repeat":"both","expression":"30 2 * * *","interval":null,"kind":'
    '"cron","source":"declaration","timezone":"Europe/Berlin"}}'
)


def test_a_row_stored_before_the_model_loads_and_is_written_again_byte_for_byte() -> None:
    spec = stored_spec("a.c", "a", OLD_ROW)
    assert spec.declaration == BackgroundJobDeclaration(
        name="a.c",
        module="a",
        cron="30 2 * * *",
        timezone="Europe/Berlin",
        enabled=False,
        configuration_source="a",
        misfire=MisfirePolicy.CATCH_UP,
        catch_up_limit=7,
        overlap=OverlapPolicy.ALLOW,
        max_concurrent=3,
        lease=timedelta(minutes=3),
        overdue_after=timedelta(hours=2),
        **policies_from(
            {
                "max_attempts": 4,
                "backoff": timedelta(seconds=5),
                "jitter": 0.0,
                "retry_on": frozenset({"failed", "cancelled"}),
            }
        ),
        dst_gap=DstGap.SKIP,
        dst_repeat=DstRepeat.BOTH,
        concurrency_group="g",
    )
    assert declaration_text(spec) == OLD_ROW


def _sample(trigger: str) -> dict[str, Any]:
    other = "interval" if trigger == "cron" else "cron"
    sample = {**SAMPLE, other: None}
    if trigger == "interval":  # daylight-saving policies are for fixed-time cron jobs
        sample.update(dst_gap=DstGap.SHIFT, dst_repeat=DstRepeat.ONCE)
    return sample


def _declared(sample: dict[str, Any]) -> BackgroundJobDeclaration:
    return BackgroundJobDeclaration(name="sample.job", module="sample", **policies_from(sample))


def _spec(declaration: BackgroundJobDeclaration) -> JobSpec:
    trigger = to_trigger(declared_parts(declaration))
    assert trigger is not None
    return JobSpec(
        declaration=declaration,
        executor=StoredExecutor(declaration.name),
        plugin="sample",
        trigger=trigger,
        declared=trigger,
        enabled=declaration.enabled,
        override=None,
        config={},
        concurrency_group=declaration.concurrency_group,
    )


def _shown(value: object) -> object:
    """As the answer of ``jobs show`` writes a policy."""
    if isinstance(value, timedelta):
        return format_duration(value)
    if isinstance(value, StrEnum):
        return value.value
    if isinstance(value, frozenset):
        return sorted(value)
    return value


def _written(value: object) -> object:
    """As an operator writes a policy in TOML or JSON."""
    return _shown(value)


@pytest.mark.parametrize(
    "change,field,says",
    [
        ({"interval": None, "cron": "61 * * * *"}, "cron", "fix the expression in the job's"),
        ({"timezone": "Mars/Olympus"}, "timezone", "fix the time zone in the job's definition"),
        ({"interval": None}, "cron", "give a cron expression or an interval in the job's"),
        ({"critical": True, "enabled": False}, "enabled", 'set "enabled": true in the job\'s'),
        ({"dst_gap": "skip"}, "dst_gap", "remove it from the job's definition"),
        ({"interval": "3651d"}, "interval", "give a shorter interval, e.g."),
    ],
)
def test_a_runtime_jobs_trigger_problem_says_to_fix_its_definition(
    change: dict[str, object], field: str, says: str
) -> None:
    body = {"kind": "http", "interval": "1h", "settings": {"url": "http://127.0.0.1:9/"}}
    definition = parse_definition(
        {key: value for key, value in {**body, **change}.items() if value is not None}
    )
    assert isinstance(definition, JobDefinition), definition
    problems = build_spec(
        "hooks.sample", definition, {"http": http_kind()}, {}, secrets=SecretRule("JOBHOST_")
    )
    assert isinstance(problems, list)
    assert [problem.field for problem in problems] == [field]
    message = problems[0].message
    assert says in message
    assert "[jobs." not in message and "declar" not in message
