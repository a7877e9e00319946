"""A module's own section, ``[modules.NAME]``, read through the module's settings model: any
class with ``model_validate(data)`` (a pydantic model), so these contracts need no validation
library."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from jobhost_contracts.redaction import bound_text, redact_text

__all__ = ["ModuleSettingsError", "SettingProblem", "SettingsModel", "module_settings", "thawed"]

_Validated_co = TypeVar("_Validated_co", covariant=True)
_T = TypeVar("_T")
_SHOWN = 80
_UNSET = object()


class SettingsModel(Protocol[_Validated_co]):
    """What :func:`module_settings` needs of a model class: pydantic's ``model_validate``."""

    def model_validate(self, obj: Any, /) -> _Validated_co: ...


@dataclass(frozen=True)
class SettingProblem:
    """One refused key of a section: ``key`` is dotted (``retry.backoff``), None for the whole
    section; ``suggestion`` is the known key a typo was probably meant to be."""

    key: str | None
    value: object
    message: str
    suggestion: str | None = None

    def describe(self) -> str:
        """``reminder_afer = 5: is not a known setting (did you mean 'reminder_after'?)``."""
        if self.key is None:
            return self.message
        if self.value is _UNSET:
            return f"{self.key}: {self.message}"
        return f"{self.key} = {_shown(self.value)}: {self.message}"


class ModuleSettingsError(ValueError):
    """``[modules.SECTION]`` holds values its module refuses; ``problems`` lists each of them.

    Raised by :func:`module_settings`; a module may raise it itself for a rule its model does
    not express. The host reports it as a configuration problem (exit 3), not a plugin failure.
    """

    def __init__(self, section: str, problems: Sequence[SettingProblem]) -> None:
        self.section = section
        self.problems = tuple(problems)
        listed = "; ".join(problem.describe() for problem in self.problems)
        super().__init__(f"[modules.{section}] {listed}")


def module_settings(
    model: SettingsModel[_T], settings: Mapping[str, Mapping[str, Any]], section: str
) -> _T | None:
    """The validated ``[modules.SECTION]`` of ``settings`` (the hook's argument), or None when
    the section is absent: the module is not configured and its jobs should be disabled.

    Every key the model does not know is refused, with the closest known key, even when the
    model itself would ignore it: a misspelt key must not leave its setting at the default.
    Raises :class:`ModuleSettingsError` listing every problem.
    """
    raw = settings.get(section)
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        problem = SettingProblem(None, raw, f"must be a table, not {type(raw).__name__}")
        raise ModuleSettingsError(section, [problem])
    data = thawed(raw)
    known = _known_keys(model)
    problems: list[SettingProblem] = []
    if known is not None:
        problems = [_unknown_key(str(key), data[key], known) for key in data if key not in known]
    try:
        validated = model.model_validate(data)
    except ValueError as error:  # pydantic's ValidationError is a ValueError
        reported = {problem.key for problem in problems}
        problems.extend(p for p in _refusals(error) if p.key not in reported)
        whole = SettingProblem(None, None, bound_text(redact_text(str(error)), 500))
        raise ModuleSettingsError(section, problems or [whole]) from None
    if problems:
        raise ModuleSettingsError(section, problems)
    return validated


def thawed(value: Any) -> Any:
    """``value`` with every mapping made a dict and every tuple a list, all the way down: the
    host hands sections over read-only, and strict models take only what TOML produces."""
    if isinstance(value, Mapping):
        return {key: thawed(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [thawed(item) for item in value]
    return value


def _known_keys(model: object) -> list[str] | None:
    fields = getattr(model, "model_fields", None)
    if not isinstance(fields, Mapping):
        return None
    config = getattr(model, "model_config", None)
    if isinstance(config, Mapping) and config.get("extra") == "allow":
        return None
    aliases = [(str(name), getattr(info, "alias", None)) for name, info in fields.items()]
    return [name for name, _ in aliases] + [a for n, a in aliases if isinstance(a, str) and a != n]


def _unknown_key(key: str, value: object, known: Iterable[str]) -> SettingProblem:
    allowed = sorted(known)
    close = difflib.get_close_matches(key, allowed, n=1, cutoff=0.6)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    listed = ", ".join(allowed) if allowed else "none"
    message = f"is not a known setting{hint}; allowed: {listed}"
    return SettingProblem(key, value, message, close[0] if close else None)


def _refusals(error: ValueError) -> list[SettingProblem]:
    errors = getattr(error, "errors", None)
    if not callable(errors):
        return []
    try:
        details = errors(include_url=False)
    except TypeError:
        details = errors()
    problems: list[SettingProblem] = []
    for detail in details if isinstance(details, list) else []:
        key = ".".join(str(part) for part in detail.get("loc", ())) or None
        message = str(detail.get("msg", "is not valid")).removeprefix("Value error, ")
        kind = detail.get("type")
        if kind == "missing":
            problems.append(SettingProblem(key, _UNSET, "is required"))
        elif kind == "extra_forbidden":
            problems.append(_unknown_key(key or "", detail.get("input"), ()))
        elif key is None:
            problems.append(SettingProblem(None, None, message))
        else:
            problems.append(SettingProblem(key, detail.get("input", _UNSET), message))
    return problems


def _shown(value: object) -> str:
    # A section's values may carry a URL with a password; they reach logs and the terminal.
    text = redact_text(repr(value))
    return text if len(text) <= _SHOWN else f"{text[: _SHOWN - 3]}..."
