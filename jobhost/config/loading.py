"""Reading settings: the file named by ``--config`` or ``JOBHOST_CONFIG``, then the environment;
every problem names where the bad value came from (the variable, or the file and its key)."""

from __future__ import annotations

import difflib
import json
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import rtoml
from pydantic import BaseModel, ValidationError
from pydantic_settings import SettingsError

from jobhost.config.redaction import redact_text, redact_url, use_redact_patterns
from jobhost.config.settings import ApiToken, JobOverride, Settings
from jobhost.errors import ConfigError

__all__ = ["CONFIG_ENV", "load_settings", "refusal", "setting_source", "short_repr"]

CONFIG_ENV = "JOBHOST_CONFIG"

# Settings whose environment form is JSON (pydantic-settings decodes them before validation).
_JSON_FIELDS = {
    "jobs": '\'{"files.orphan-cleanup": {"enabled": false}}\'',
    # The built-in module's section: an example every installation accepts as it is.
    "modules": '\'{"jobhost": {"keep_days": 90}}\'',
    "api_tokens": '\'[{"name": "deployer", "sha256": "<64 hex digits>", "scopes": ["read"]}]\'',
}
# Parts of a token that may hold a secret pasted by mistake: never shown in an error.
_SHOWN_TOKEN_PARTS = frozenset({"name", "scopes"})


def load_settings(path: str | os.PathLike[str] | None = None) -> Settings:
    """Load and validate the settings; raise :class:`ConfigError` listing every bad field (a
    named file that does not exist among them: a typo must not silently run defaults)."""
    named = path if path is not None else os.environ.get(CONFIG_ENV) or None
    data: dict[str, Any] = {}
    source = "defaults and environment"
    file: Path | None = None
    if named is not None:
        file = Path(named)
        source = str(file)
        try:
            data = _parse(file.read_bytes().decode())
        except FileNotFoundError:
            missing = (
                f"configuration file {file} does not exist; fix the path given with --config or "
                f"{CONFIG_ENV}"
            )
            raise ConfigError([missing], source) from None
        except (IsADirectoryError, PermissionError, UnicodeDecodeError) as error:
            raise ConfigError([f"cannot read {file}: {error}"], source) from None
        except tomllib.TOMLDecodeError as error:
            raise ConfigError([f"{file} is not valid TOML: {error}"], source) from None
    problems = _malformed_json(os.environ)
    if problems:
        raise ConfigError(problems, source)
    try:
        settings = Settings(**data)
    except ValidationError as error:
        raise ConfigError(_describe(error, data, file), source) from None
    except SettingsError as error:  # a decoding failure _malformed_json did not foresee
        raise ConfigError([redact_text(str(error))], source) from None
    if file is not None:
        settings._file = file.name
    use_redact_patterns(settings.redact_patterns)
    return settings


def _parse(text: str) -> dict[str, Any]:
    # rtoml is six times faster on 10,000 jobs (paid by every command); tomllib's message
    # (line and column) is the one shown, and it has the last word where the two disagree.
    try:
        return rtoml.loads(text)
    except rtoml.TomlParsingError:
        return tomllib.loads(text)


def setting_source(field: str, data: Mapping[str, Any], file: Path | None) -> str:
    """Where setting ``field`` came from: its variable, the file, or the default."""
    variable = f"JOBHOST_{field.upper()}"
    if any(name.upper() == variable for name in os.environ):
        return f"environment {variable}"
    if field in data and file is not None:
        return f"in {file.name}"
    return "default"


def _malformed_json(environ: Mapping[str, str]) -> list[str]:
    problems: list[str] = []
    for field, example in _JSON_FIELDS.items():
        variable = f"JOBHOST_{field.upper()}"
        raw = next((v for k, v in environ.items() if k.upper() == variable), None)
        if raw is None:
            continue
        wanted, shape, form = (
            (list, "list", "[...]") if field == "api_tokens" else (dict, "object", "{...}")
        )
        try:
            value = json.loads(raw)
        except json.JSONDecodeError as error:
            problems.append(
                f"environment {variable} is not valid JSON ({error.msg} at character "
                f"{error.pos}); write one JSON {shape}, e.g. {variable}={example}, or unset it "
                f"and use the [{field}] tables of the configuration file"
            )
            continue
        if not isinstance(value, wanted):
            problems.append(
                f"environment {variable} must be a JSON {shape} ({form}), not "
                f"{type(value).__name__}, e.g. {variable}={example}; or unset it and use the "
                f"[{field}] tables of the configuration file"
            )
    return problems


def _describe(error: ValidationError, data: Mapping[str, Any], file: Path | None) -> list[str]:
    problems: list[str] = []
    for item in error.errors():
        location = ".".join(_key(part) for part in item["loc"])
        field = str(item["loc"][0]) if item["loc"] else ""
        value = item.get("input")
        if field == "database_url" and isinstance(value, str):
            value = redact_url(value)
        # A missing part's input is the whole token, digest included.
        hidden = field == "session_secret" or (
            field == "api_tokens"
            and not (item["loc"][-1] in _SHOWN_TOKEN_PARTS and not isinstance(value, dict))
        )
        message = refusal(item)
        if not field:
            # A rule across settings: the message names them; say where each came from.
            where = "; ".join(
                f"{name}: {setting_source(name, data, file)}"
                for name in Settings.model_fields
                if name in message
            )
            problems.append(f"{message} ({where})" if where else message)
            continue
        origin = setting_source(field, data, file)
        if item["type"] == "extra_forbidden":
            # A key inside [jobs."NAME"] or [[api_tokens]] is matched against that table's keys.
            table: dict[str, type[BaseModel]] = {"jobs": JobOverride, "api_tokens": ApiToken}
            model = table.get(field, Settings) if len(item["loc"]) > 1 else Settings
            close = difflib.get_close_matches(str(item["loc"][-1]), list(model.model_fields), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            message = f"is not a known setting{hint}; see docs/operations/settings.md"
            problems.append(f"{location} ({origin}): {message}")
            continue
        if hidden:
            # A token's digest field is where a secret gets pasted by mistake: never echo it.
            problems.append(f"{location} ({origin}) (value not shown): {message}")
            continue
        text = repr(value)
        shown = text if len(text) <= 200 else f"{text[:200]}... ({len(text)} characters)"
        problems.append(f"{location} ({origin}) = {shown}: {message}")
    return problems


def refusal(item: Mapping[str, Any]) -> str:
    """The message of one of a pydantic ``ValidationError``'s ``errors()``, as a validator wrote
    it (without pydantic's "Value error, ")."""
    return str(item["msg"]).removeprefix("Value error, ")


def short_repr(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _key(part: object) -> str:
    """A TOML key as it is written: quoted when it holds a dot (``jobs."files.cleanup"``)."""
    text = str(part)
    return f'"{text}"' if "." in text else text
