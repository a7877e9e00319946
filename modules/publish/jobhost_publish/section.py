"""Reading ``[modules.publish]`` at start-up: every problem of every entry, listed together.

Each problem names the entry (``modules.publish.jobs[0] 'billing.close-day'``), the key and what
is allowed. They are raised as one ``ModuleSettingsError`` (a ``ValueError``), so
``jobhost validate`` shows them all at once, as a problem of ``[modules.publish]``.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from jobhost_contracts import ModuleSettingsError, SettingProblem, safe_url
from pydantic import ValidationError

from jobhost_publish.settings import SECTION, BrokerUrls, PublishJobSettings, full_name, thawed

__all__ = ["PublishConfig", "parse_section"]

_SHOWN_LIMIT = 60
# Values that may hold a credential, or are too big to be worth quoting, are never repeated.
_NOT_SHOWN = frozenset({"headers", "payload"})
_HINTS = {
    "rabbitmq_url": "secrets by reference only: put the URL in an environment variable and set "
    "rabbitmq_url_env = 'RABBITMQ_URL' to its name",
    "url": "brokers are addressed in [modules.publish] with nats_url, nats_url_env or "
    "rabbitmq_url_env",
}


@dataclass(frozen=True)
class PublishConfig:
    """``[modules.publish]`` checked: where the brokers are, and the jobs in declaration order."""

    urls: BrokerUrls
    jobs: tuple[PublishJobSettings, ...]


def parse_section(section: Mapping[str, Any]) -> PublishConfig:
    """The checked section; raise one ``ValueError`` listing every problem found."""
    raw = thawed(section)
    problems: list[str] = []
    entries = raw.pop("jobs", [])
    urls = BrokerUrls()
    try:
        urls = BrokerUrls.model_validate(raw)
    except ValidationError as error:
        problems.extend(_described("[modules.publish]", error, BrokerUrls.model_fields))
    if not isinstance(entries, list):
        problems.append(
            f"[modules.publish] jobs = {_shown(entries)}: must be a list of tables, written as "
            "[[modules.publish.jobs]]"
        )
        entries = []
    jobs: list[PublishJobSettings] = []
    seen: dict[str, str] = {}
    for index, entry in enumerate(entries):
        where = f"modules.publish.jobs[{index}]"
        if not isinstance(entry, dict):
            problems.append(
                f"{where} = {_shown(entry)}: must be a table ([[modules.publish.jobs]])"
            )
            continue
        name = entry.get("name")
        if isinstance(name, str) and name:
            # Names are compared before anything else is checked: a clash is worth knowing
            # even while the entries have other problems.
            job_name = full_name(name)
            if job_name in seen:
                problems.append(
                    f"{where} {name!r}: name {job_name!r} is already used by {seen[job_name]}"
                )
            seen.setdefault(job_name, where)
            where = f"{where} {name!r}"
        try:
            job = PublishJobSettings.model_validate(entry)
        except ValidationError as error:
            problems.extend(_described(where, error, PublishJobSettings.model_fields))
            continue
        missing = urls.missing(job.broker)
        if missing is not None:
            problems.append(f"{where}: {missing}")
        jobs.append(job)
    if problems:
        count = f"{len(problems)} problems" if len(problems) > 1 else "1 problem"
        # A problem of the operator's section: the host reports it as such, not as a plugin's.
        raise ModuleSettingsError(
            SECTION, [SettingProblem(None, None, f"{count}: " + " | ".join(problems))]
        )
    return PublishConfig(urls, tuple(jobs))


def _described(where: str, error: ValidationError, fields: Mapping[str, Any]) -> list[str]:
    found: list[str] = []
    for detail in error.errors(include_url=False):
        location = [str(part) for part in detail["loc"]]
        key = ".".join(location)
        message = str(detail["msg"]).removeprefix("Value error, ")
        if detail["type"] == "extra_forbidden":
            close = difflib.get_close_matches(key, list(fields), n=1)
            guess = f"did you mean {close[0]!r}? " if close else ""
            hint = _HINTS.get(key, f"{guess}allowed: {', '.join(sorted(fields))}")
            found.append(f"{where}: {key!r} is not a known key; {hint}")
        elif not location:
            found.append(f"{where}: {message}")
        elif detail["type"] == "missing":
            found.append(f"{where}: {key} is required")
        elif location[0] in _NOT_SHOWN:
            found.append(f"{where}: {key}: {message}")
        else:
            found.append(f"{where}: {key} = {_shown(detail['input'], key)}: {message}")
    return found


def _shown(value: object, key: str = "") -> str:
    if key == "nats_url" and isinstance(value, str):
        value = safe_url(value)
    text = repr(value)
    return text if len(text) <= _SHOWN_LIMIT else f"{text[:_SHOWN_LIMIT]}..."
