"""Job kinds: parameterised executors a module offers for jobs created at run time.

A kind is a name (``http``), a description, the JSON schema of its settings, a ``validate``
callable that turns a settings object (parsed JSON) into the module's own checked settings, and
a ``factory`` that makes an executor from them. The contracts stay free of any validation
library: a module may use pydantic (or anything) behind ``validate`` and publish the model's
schema as ``settings_schema``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from jobhost_contracts.executor import IJobExecutor

__all__ = ["JobKind", "KindSettingsError"]


class KindSettingsError(ValueError):
    """A kind's settings are refused; ``field`` is the dotted key at fault (``url``,
    ``headers.Accept``), and the message says what is allowed."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        self.reason = message
        super().__init__(f"settings.{field}: {message}" if field else f"settings: {message}")


@dataclass(frozen=True)
class JobKind:
    """One kind of runtime job.

    ``validate(settings)`` raises :class:`KindSettingsError` (or ``ValueError``) naming the
    field and the fix; it reads no secret value (secrets are environment variable names) and
    connects to nothing. ``factory(job_name, validated)`` makes the executor for one job.
    ``module`` is the module runtime jobs of this kind belong to; its ``[modules.NAME]`` section
    is their configuration, as for declared jobs.
    """

    name: str
    description: str
    settings_schema: Mapping[str, Any]
    validate: Callable[[Mapping[str, Any]], Any]
    factory: Callable[[str, Any], IJobExecutor]
    module: str = ""
    examples: tuple[Mapping[str, Any], ...] = field(default=())
    """Example settings objects, shown by ``jobhost kinds`` and the API."""
    secret_variables: Callable[[Any], Mapping[str, str]] | None = None
    """The environment variables a job of this kind reads at run time, from its validated
    settings, by the settings key that names each (``secret_headers.Authorization`` ->
    ``HOOK_AUTH``). The host lets a runtime job name only the variables the operator made
    available to runtime jobs; a kind that reads none leaves this None."""
