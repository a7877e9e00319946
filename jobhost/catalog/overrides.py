"""Applying ``[jobs."name"]`` overrides, remembering where each part of a trigger came from:
that decides the fix a problem suggests (the declaration, or the deployment's configuration)."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, fields, replace
from datetime import timedelta
from typing import Any, Literal

from jobhost_contracts import BackgroundJobDeclaration, DstGap, DstRepeat

from jobhost.catalog.model import EffectiveTrigger, Problem, suggest
from jobhost.config import JobOverride, format_duration

__all__ = [
    "TriggerParts",
    "declared_parts",
    "effective_parts",
    "section",
    "to_trigger",
    "unknown_overrides",
]

Origin = Literal["declaration", "override", "api"]  # api: a runtime job's definition


@dataclass(frozen=True)
class TriggerParts:
    """A job's trigger before it is known to be valid: both, one or neither of cron and interval
    (an override replaces them together)."""

    name: str
    module: str
    cron: str | None
    interval: timedelta | None
    timezone: str
    enabled: bool
    dst_gap: DstGap
    dst_repeat: DstRepeat
    trigger_from: Origin
    zone_from: Origin
    enabled_from: Origin
    dst_from: Origin


_PARTS = tuple(part.name for part in fields(TriggerParts))


def declared_parts(
    declaration: BackgroundJobDeclaration, origin: Origin = "declaration"
) -> TriggerParts:
    """What the declaration alone says, every part from ``origin``."""
    said: dict[str, Any] = {
        part: origin if part.endswith("_from") else getattr(declaration, part) for part in _PARTS
    }
    return TriggerParts(**said)


def effective_parts(parts: TriggerParts, override: JobOverride | None) -> TriggerParts:
    if override is None:
        return parts
    changes: dict[str, Any] = {}
    if override.cron is not None or override.interval is not None:
        # Both set is an override-both-triggers problem; keeping both lets validation say so.
        changes.update(cron=override.cron, interval=override.interval, trigger_from="override")
    if override.timezone is not None:
        changes.update(timezone=override.timezone, zone_from="override")
    if override.enabled is not None:
        changes.update(enabled=override.enabled, enabled_from="override")
    if override.dst_gap is not None or override.dst_repeat is not None:
        changes.update(
            dst_gap=override.dst_gap or parts.dst_gap,
            dst_repeat=override.dst_repeat or parts.dst_repeat,
            dst_from="override",
        )
    return replace(parts, **changes)


def to_trigger(parts: TriggerParts) -> EffectiveTrigger | None:
    """The single trigger ``parts`` describe; None when they hold both a cron and an interval."""
    source: Origin = (
        "override"
        if "override" in (parts.trigger_from, parts.zone_from, parts.dst_from)
        else parts.trigger_from
    )
    if parts.cron is not None and parts.interval is not None:
        return None
    if parts.cron is not None:
        return EffectiveTrigger(
            "cron", parts.cron, None, parts.timezone, source, parts.dst_gap, parts.dst_repeat
        )
    if parts.interval is not None:
        expression = format_duration(parts.interval)
        return EffectiveTrigger("interval", expression, parts.interval, parts.timezone, source)
    return EffectiveTrigger(None, None, None, parts.timezone, source)


def unknown_overrides(
    overrides: Mapping[str, JobOverride], declared: Collection[str], *, plugins_failed: int
) -> list[Problem]:
    """An ``unknown-override`` for every override naming a job nobody declares (a typo would
    leave the job on its declared schedule while the operator believes it changed)."""
    problems: list[Problem] = []
    for name in overrides:
        if name in declared:
            continue
        close = suggest(name, list(declared))
        hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
        if not declared:
            hint = "; no jobs are declared at all"
        if plugins_failed:
            hint += (
                f" ({plugins_failed} plugin(s) failed to load and may declare it; "
                "see the plugin problems)"
            )
        message = (
            f"{section(name)} overrides a job that no module declares{hint}; fix the name or "
            "remove the section"
        )
        problems.append(Problem(name, None, "unknown-override", message))
    return problems


def section(name: str) -> str:
    return f'[jobs."{name}"]'
