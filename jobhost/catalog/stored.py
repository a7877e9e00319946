"""A job's effective declaration as the store keeps it, and the job read back from it.

A host writes :func:`declaration_text` of every job into its schedule row, so read-only
commands show a job from the store alone, without importing the application's modules.
:func:`stored_spec` reads it back, equal to the synced job but for its executor, which refuses.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum
from typing import Any, Literal, cast

import orjson
from jobhost_contracts import (
    BackgroundJobDeclaration,
    DstGap,
    DstRepeat,
    JobContext,
    JobPolicies,
    JobResult,
    RetryPolicy,
    field_types,
)

from jobhost.catalog.model import EMPTY_CONFIG, EffectiveTrigger, JobSpec
from jobhost.config import JobOverride

__all__ = [
    "StoredExecutor",
    "StoredFacts",
    "declaration_text",
    "json_value",
    "stored_facts",
    "stored_spec",
]

_FORMAT = 1
# Reading 10,000 jobs back: enums by value (an Enum call is costly), shared parts made once.
_DST_GAP = {policy.value: policy for policy in DstGap}
_DST_REPEAT = {policy.value: policy for policy in DstRepeat}
_TRIGGER_PARTS = ("kind", "expression", "interval", "timezone", "source", "dst_gap", "dst_repeat")
_SHARED: dict[tuple[Hashable, ...], object] = {}
_SHARED_KEPT = 20_000


def declaration_text(spec: JobSpec) -> str:
    """``spec``'s effective declaration as compact JSON: equal jobs, equal text."""
    declaration = spec.declaration
    document: dict[str, Any] = {
        "format": _FORMAT,
        "plugin": spec.plugin,
        "enabled": spec.enabled,
        "group": spec.concurrency_group,
        "trigger": _trigger_json(spec.trigger),
        "declared": _trigger_json(spec.declared),
        "override": spec.override and spec.override.model_dump(mode="json", exclude_none=True),
        "description": declaration.description,
        "configuration_source": declaration.configuration_source,
    }
    for name, key, _ in _POLICIES:
        document[key] = json_value(getattr(declaration, name))
    return _compact_json(
        document, plain=spec.override is None and math.isfinite(declaration.retry.jitter)
    )


def stored_spec(
    name: str, module: str, text: str, config: Mapping[str, Any] = EMPTY_CONFIG
) -> JobSpec:
    """The job whose effective declaration is ``text``; ``config`` is its module's section.
    Raises ``ValueError`` (``KeyError``, ``TypeError``) for a text this version did not write."""
    data = _document(text)
    declared = _trigger(data["declared"])
    declaration = BackgroundJobDeclaration(
        name=name,
        module=module,
        cron=declared.expression if declared.kind == "cron" else None,
        interval=declared.interval,
        timezone=declared.timezone,
        dst_gap=declared.dst_gap,
        dst_repeat=declared.dst_repeat,
        configuration_source=data["configuration_source"],
        description=data["description"],
        # A policy newer than the text keeps its default.
        **{field: read(data[key]) for field, key, read in _POLICIES if key in data},
    )
    override = data["override"]
    return JobSpec(
        declaration=declaration,
        executor=StoredExecutor(name),
        plugin=data["plugin"],
        trigger=_trigger(data["trigger"]),
        declared=declared,
        enabled=data["enabled"],
        override=JobOverride.model_validate(override) if override is not None else None,
        config=config,
        concurrency_group=data["group"],
    )


@dataclass(frozen=True, slots=True)
class StoredFacts:
    """What a report asks of a stored declaration, read without building the job: at 10,000
    jobs :func:`stored_spec` (a validated declaration, policies, override) is most of a read."""

    enabled: bool
    group: str | None
    trigger: EffectiveTrigger
    declared: EffectiveTrigger
    overridden: bool
    override_enabled: bool | None
    description: str
    critical: bool
    declared_enabled: bool
    configuration_source: str | None
    overdue_after: timedelta | None
    lease: timedelta | None


def stored_facts(text: str) -> StoredFacts:
    """Raises as :func:`stored_spec` does."""
    data = _document(text)
    override = data["override"]
    return StoredFacts(
        enabled=data["enabled"],
        group=data["group"],
        trigger=_trigger(data["trigger"]),
        declared=_trigger(data["declared"]),
        overridden=override is not None,
        override_enabled=override.get("enabled") if override is not None else None,
        description=data["description"],
        critical=data["critical"],
        declared_enabled=data["declared_enabled"],
        configuration_source=data["configuration_source"],
        overdue_after=_duration(data["overdue_after"]),
        lease=_duration(data["lease"]),
    )


def json_value(
    value: object, duration: Callable[[timedelta], Any] = timedelta.total_seconds
) -> Any:
    """A policy's value in JSON types: an enum by its value, a set sorted, a retry policy as an
    object, a duration by ``duration`` (seconds, as the stored text writes it)."""
    if isinstance(value, timedelta):
        return duration(value)
    if isinstance(value, StrEnum):
        return value.value
    if isinstance(value, RetryPolicy):
        return {part: json_value(getattr(value, part), duration) for part in _RETRY_READERS}
    if isinstance(value, frozenset):
        return sorted(value)
    return value


class StoredExecutor:
    """The executor of a job read from the store: a read never runs it, and a run refuses."""

    def __init__(self, name: str) -> None:
        self.name = name

    def execute(self, context: JobContext) -> JobResult:
        raise RuntimeError(
            f"job {self.name} was read from the store, not loaded from its module: run it "
            "through a host or with `jobhost trigger`, which loads the module"
        )


def _document(text: str) -> dict[str, Any]:
    data: dict[str, Any] = orjson.loads(text)
    if data.get("format") != _FORMAT:
        raise ValueError(f"unknown declaration format {data.get('format')!r}")
    return data


def _compact_json(document: dict[str, Any], *, plain: bool) -> str:
    """``json.dumps(document, sort_keys=True, separators=(",", ":"))``, byte for byte (the text
    is part of the catalog version). orjson writes it ten times faster, except where the two
    differ: beyond ASCII, DEL, an exponent, NaN or infinity (``plain`` is false where one could
    be); there ``json`` writes it.
    """
    if plain:
        try:
            text = orjson.dumps(document, option=orjson.OPT_SORT_KEYS).decode()
        except orjson.JSONEncodeError:
            text = None
        if (
            text is not None
            and text.isascii()
            and "\x7f" not in text
            and _EXPONENT.search(text) is None
        ):
            return text
    return json.dumps(document, sort_keys=True, separators=(",", ":"))


_EXPONENT = re.compile(r"[0-9][eE]")


def _trigger_json(trigger: EffectiveTrigger) -> dict[str, Any]:
    return {part: json_value(getattr(trigger, part)) for part in _TRIGGER_PARTS}


def _trigger(data: Mapping[str, Any]) -> EffectiveTrigger:
    key = tuple(data[part] for part in _TRIGGER_PARTS)
    found = _SHARED.get(key)
    if found is None:
        found = EffectiveTrigger(
            # Quoted: a subscripted Literal is built anew at each call.
            kind=cast("Literal['cron', 'interval'] | None", data["kind"]),
            expression=data["expression"],
            interval=_duration(data["interval"]),
            timezone=data["timezone"],
            source=cast("Literal['declaration', 'override', 'api']", data["source"]),
            dst_gap=_DST_GAP[data["dst_gap"]],
            dst_repeat=_DST_REPEAT[data["dst_repeat"]],
        )
        _share(key, found)
    return cast(EffectiveTrigger, found)


def _retry(data: Mapping[str, Any]) -> RetryPolicy:
    values = {part: read(data[part]) for part, read in _RETRY_READERS.items()}
    # With the types: 1 and 1.0 (and True) are equal keys, but not equal policies.
    key = ("retry", *((type(value), value) for value in values.values()))
    found = _SHARED.get(key)
    if found is None:
        found = RetryPolicy(**values)
        _share(key, found)
    return cast(RetryPolicy, found)


def _share(key: tuple[Hashable, ...], value: object) -> None:
    if len(_SHARED) >= _SHARED_KEPT:
        _SHARED.clear()
    _SHARED[key] = value


def _duration(value: float | None) -> timedelta | None:
    return timedelta(seconds=value) if value is not None else None


def _reader(accepted: tuple[type, ...]) -> Callable[[Any], Any]:
    """How a policy's stored JSON value is read back, by the types the policy takes."""
    if timedelta in accepted:
        return _duration
    if RetryPolicy in accepted:
        return _retry
    if frozenset in accepted:
        return frozenset
    for kind in accepted:
        if issubclass(kind, StrEnum):
            return {policy.value: policy for policy in kind}.__getitem__
    return lambda value: value  # as stored


# Every policy but the declared trigger's parts (in "declared"), stored under its own name but
# two, named before the policies were one class: (field, key, reader).
_IN_TRIGGER = frozenset({"cron", "interval", "timezone", "dst_gap", "dst_repeat"})
_RENAMED = {"enabled": "declared_enabled", "concurrency_group": "declared_group"}
_POLICIES = tuple(
    (name, _RENAMED.get(name, name), _reader(accepted))
    for name, accepted in field_types(JobPolicies).items()
    if name not in _IN_TRIGGER
)
_RETRY_READERS = {part: _reader(accepted) for part, accepted in field_types(RetryPolicy).items()}
