"""The checks the contracts offer every module: text, flags, a trigger, read-only sections, echoed
secrets, and a runtime kind's first refusal."""

from __future__ import annotations

from datetime import timedelta
from types import MappingProxyType

import pytest
from jobhost_contracts import (
    KindSettingsError,
    check_trigger,
    flag,
    hide_secrets,
    non_empty_text,
    thawed,
)
from pydantic import BaseModel, ConfigDict, ValidationError, field_validator


@pytest.mark.parametrize("value", ["UTC", " x "])
def test_non_empty_text_returns_the_text(value: str) -> None:
    assert non_empty_text(value) == value


@pytest.mark.parametrize("value", ["", "   ", None, 5])
def test_non_empty_text_refuses_blanks_and_other_types(value: object) -> None:
    with pytest.raises(ValueError, match=r"^must be a non-empty string$"):
        non_empty_text(value)


@pytest.mark.parametrize("value", [True, False])
def test_flag_returns_true_or_false(value: bool) -> None:
    assert flag(value) is value


@pytest.mark.parametrize("value", [1, 0, "yes", "true", None])
def test_flag_refuses_anything_but_a_bool(value: object) -> None:
    with pytest.raises(ValueError, match=r"^must be true or false$"):
        flag(value)


@pytest.mark.parametrize(
    ("cron", "interval", "enabled"),
    [("0 2 * * *", None, True), (None, timedelta(hours=1), True), (None, None, False)],
)
def test_check_trigger_takes_one_trigger_or_none_when_disabled(
    cron: str | None, interval: timedelta | None, enabled: bool
) -> None:
    check_trigger(cron, interval, enabled=enabled, examples=("0 2 * * *", "1h"))


@pytest.mark.parametrize("enabled", [True, False])
def test_check_trigger_refuses_both_triggers(enabled: bool) -> None:
    with pytest.raises(ValueError, match=r"^has both cron and interval; keep exactly one$"):
        check_trigger("* * * * *", timedelta(1), enabled=enabled, examples=("0 2 * * *", "1h"))


def test_check_trigger_refuses_an_enabled_entry_without_one_showing_the_examples() -> None:
    with pytest.raises(ValueError) as raised:
        check_trigger(None, None, enabled=True, examples=("*/5 * * * *", "20s"))
    assert str(raised.value) == "needs cron (e.g. '*/5 * * * *') or interval (e.g. '20s')"


def test_hide_secrets_hides_each_value_whole_and_ignores_empty_ones() -> None:
    echoed = "token abc123 and abc, nothing else"
    assert hide_secrets(echoed, ["abc", "abc123", ""]) == "token *** and ***, nothing else"
    assert hide_secrets("plain", []) == "plain"


def test_thawed_makes_read_only_sections_plain_all_the_way_down() -> None:
    frozen = MappingProxyType({"jobs": ({"name": "a", "tags": ("x",)},), "n": 1})
    plain = thawed(frozen)
    assert plain == {"jobs": [{"name": "a", "tags": ["x"]}], "n": 1}
    assert type(plain) is dict and type(plain["jobs"]) is list
    assert type(plain["jobs"][0]) is dict and type(plain["jobs"][0]["tags"]) is list


class _Call(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")

    url: str
    retries: int = 0

    @field_validator("url")
    @classmethod
    def _https(cls, value: str) -> str:
        if not value.startswith("https://"):
            raise ValueError("must be an https:// URL")
        return value


def _refusal(settings: dict[str, object]) -> KindSettingsError:
    with pytest.raises(ValidationError) as raised:
        _Call.model_validate(settings)
    return KindSettingsError.first_of(raised.value, _Call.model_fields)


def test_first_of_names_the_key_and_says_what_is_allowed() -> None:
    error = _refusal({"url": "http://x"})
    assert (error.field, error.reason) == ("url", "must be an https:// URL")
    assert str(error) == "settings.url: must be an https:// URL"
    assert (
        _refusal({"url": "https://x", "retries": "2"}).reason == "Input should be a valid integer"
    )


def test_first_of_answers_an_unknown_key_with_the_known_ones() -> None:
    error = _refusal({"url": "https://x", "retrys": 2})
    assert str(error) == "settings.retrys: is not a known key; allowed: url, retries"


def test_first_of_reads_a_plain_value_error_as_the_whole_settings_problem() -> None:
    error = KindSettingsError.first_of(ValueError("not an object"), ())
    assert (error.field, str(error)) == ("", "settings: not an object")
