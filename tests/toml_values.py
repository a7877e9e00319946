"""Writing values into the ``jobhost.toml`` files tests make."""

from __future__ import annotations

import json
from typing import Any

__all__ = ["toml_value"]


def toml_value(value: Any) -> str:
    """``value`` as TOML: a boolean, a number, a list of these, or a quoted string."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(toml_value(item) for item in value) + "]"
    return json.dumps(str(value))
