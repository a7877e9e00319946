"""module_settings: a module's section through its own model, refused as a settings problem."""

from __future__ import annotations

from datetime import timedelta
from types import MappingProxyType
from typing import Annotated

import pytest
from jobhost_contracts import (
    ModuleSettingsError,
    env_name,
    http_url,
    module_settings,
    non_negative_duration,
    positive_duration,
    safe_url,
)
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field


class Shop(BaseModel):
    model_config = ConfigDict(frozen=True)

    reminder_after: Annotated[timedelta, BeforeValidator(positive_duration)] = timedelta(hours=1)
    tenants: list[str] = Field(default_factory=list)
    token_env: Annotated[str, BeforeValidator(env_name)] = "SHOP_TOKEN"
    webhook: Annotated[str | None, BeforeValidator(lambda v: v and http_url(v))] = None


def test_an_absent_section_is_a_module_not_configured() -> None:
    assert module_settings(Shop, {"other": {}}, "shop") is None


def test_a_read_only_section_is_validated_into_the_model() -> None:
    settings = MappingProxyType(
        {"shop": MappingProxyType({"reminder_after": "90m", "tenants": ("a",)})}
    )

    shop = module_settings(Shop, settings, "shop")

    assert shop == Shop(reminder_after=timedelta(minutes=90), tenants=["a"])


def test_a_misspelt_key_is_refused_with_the_key_it_was_meant_to_be() -> None:
    # The model would ignore the key (pydantic's default): the setting would stay at its default.
    with pytest.raises(ModuleSettingsError) as raised:
        module_settings(Shop, {"shop": {"reminder_afer": 5}}, "shop")

    assert str(raised.value).startswith(
        "[modules.shop] reminder_afer = 5: is not a known setting (did you mean "
        "'reminder_after'?); allowed: reminder_after, tenants, token_env, webhook"
    )
    [problem] = raised.value.problems
    assert (problem.key, problem.value, problem.suggestion) == (
        "reminder_afer",
        5,
        "reminder_after",
    )
    assert raised.value.section == "shop"
    assert isinstance(raised.value, ValueError)


def test_every_bad_value_is_listed_with_its_key_and_value_and_no_password() -> None:
    section = {
        "reminder_after": "-5m",
        "token_env": "not a var",
        "webhook": "ftp://u:S3cret@files.example/",
        "colour": "blue",
    }
    with pytest.raises(ModuleSettingsError) as raised:
        module_settings(Shop, {"shop": section}, "shop")

    text = str(raised.value)
    assert "reminder_after = '-5m': must be a positive duration" in text
    assert "token_env = 'not a var': must name an environment variable" in text
    assert "webhook = 'ftp://u:***@files.example/': required, an http:// or https://" in text
    assert "colour = 'blue': is not a known setting; allowed:" in text
    assert "S3cret" not in text
    assert len(raised.value.problems) == 4


def test_a_section_that_is_not_a_table_is_refused() -> None:
    with pytest.raises(ModuleSettingsError, match=r"\[modules.shop\] must be a table, not int"):
        module_settings(Shop, {"shop": 5}, "shop")  # type: ignore[dict-item]


@pytest.mark.parametrize(
    ("check", "value", "expected"),
    [
        (positive_duration, "1h30m", timedelta(minutes=90)),
        (positive_duration, 30, timedelta(seconds=30)),
        (positive_duration, None, None),
        (non_negative_duration, "0s", timedelta(0)),
        (env_name, "PARTNER_TOKEN", "PARTNER_TOKEN"),
        (http_url, "https://api.example:8443/v1", "https://api.example:8443/v1"),
    ],
)
def test_the_shared_checks_return_the_value_typed(check, value, expected) -> None:  # type: ignore[no-untyped-def]
    assert check(value) == expected


@pytest.mark.parametrize(
    ("check", "value", "says"),
    [
        (positive_duration, "0s", "must be a positive duration"),
        (positive_duration, "soon", "is not a duration"),
        (non_negative_duration, "-1s", "must not be negative"),
        (env_name, "1ABC", "must name an environment variable"),
        (http_url, "https://h:99999/", "port"),
        (http_url, "mailto:x@y", "http:// or https://"),
    ],
)
def test_the_shared_checks_refuse_saying_what_is_allowed(check, value, says) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError, match=says):
        check(value)


def test_safe_url_hides_every_credential() -> None:
    assert safe_url("https://u:pw@api.example/v1?key=abc") == "https://***@api.example/v1?***"
    assert safe_url("nats://token@h:4222") == "nats://***@h:4222"
    assert safe_url("http://api.example/x") == "http://api.example/x"
