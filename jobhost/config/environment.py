"""The ``JOBHOST_*`` environment as a source of settings, and the variables it leaves to runtime
jobs: those under the runtime secret prefix are secrets handed to jobs, never settings.

A setting given in the environment replaces the file's whole, a table as much as a list or a
number: ``JOBHOST_OPERATOR_TOKENS='{}'`` leaves no operator, whatever the file names (merged
key by key, the file's names would survive the variable meant to revoke them)."""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from typing import Any, get_origin

from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, EnvSettingsSource, PydanticBaseSettingsSource

__all__ = [
    "HOST_VARIABLES",
    "RUNTIME_SECRET_PREFIX",
    "EnvWithoutSecrets",
    "FileUnderEnvironment",
    "check_allowed_secrets",
    "check_secret_prefix",
]

RUNTIME_SECRET_PREFIX = "JOBHOST_RUNTIME_SECRET_"
"""The default of ``runtime_secret_env_prefix``."""
HOST_VARIABLES = ("JOBHOST_CONFIG", "JOBHOST_LOAD_PLUGINS")
"""Variables the host reads that are not settings of the model."""
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class EnvWithoutSecrets(EnvSettingsSource):
    """The ``JOBHOST_*`` environment, without the variables meant for runtime jobs."""

    def __init__(self, settings_cls: type[BaseSettings], prefixes: set[str]) -> None:
        self._prefixes = tuple(prefix.lower() for prefix in prefixes)
        super().__init__(settings_cls)

    def _load_env_vars(self) -> Mapping[str, str | None]:
        found = super()._load_env_vars()
        return {k: v for k, v in found.items() if not k.lower().startswith(self._prefixes)}


class FileUnderEnvironment(PydanticBaseSettingsSource):
    """The file's settings (``file``), without the tables ``environment`` gives."""

    def __init__(
        self,
        settings_cls: type[BaseSettings],
        file: PydanticBaseSettingsSource,
        environment: PydanticBaseSettingsSource,
    ) -> None:
        super().__init__(settings_cls)
        self._file = file
        self._environment = environment

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False  # the whole mapping comes from __call__

    def __call__(self) -> dict[str, Any]:
        values = self._file()
        given = self._environment()
        fields = self.settings_cls.model_fields
        return {
            name: value
            for name, value in values.items()
            if not (name in given and name in fields and _is_table(fields[name]))
        }


def _is_table(field: FieldInfo) -> bool:
    return get_origin(field.annotation) is dict


def check_secret_prefix(value: str, setting_variables: Collection[str]) -> str:
    """``value`` as ``runtime_secret_env_prefix``: a variable name's start that no setting's
    variable (``setting_variables``) starts with."""
    if not _ENV_NAME.fullmatch(value):
        raise ValueError(
            "must be the start of an environment variable name (letters, digits, _), "
            f"e.g. {RUNTIME_SECRET_PREFIX!r}"
        )
    taken = [name for name in setting_variables if name.upper().startswith(value.upper())]
    if taken:
        raise ValueError(
            f"would hand setting variables to runtime jobs ({', '.join(taken[:3])}); choose "
            f"a prefix no setting's variable starts with, e.g. {RUNTIME_SECRET_PREFIX!r}"
        )
    return value


def check_allowed_secrets(value: list[str], setting_variables: Collection[str]) -> list[str]:
    """``value`` as ``runtime_secrets_allowed``: variable names, none of them jobhost's own."""
    settings_names = {name.upper() for name in setting_variables}
    for name in value:
        if not _ENV_NAME.fullmatch(name):
            raise ValueError(f"{name!r} is not an environment variable name")
        if name.upper() in settings_names or name.upper().startswith("JOBHOST_"):
            raise ValueError(
                f"{name} is a jobhost variable; runtime jobs never read the host's "
                "settings: give the secret a variable of its own"
            )
    return value
