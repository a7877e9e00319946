"""A run's ``Success`` value as the ledger keeps it: JSON text of at most :data:`RESULT_LIMIT`
bytes, made once on the executor's thread, then stored, logged and shown as it is.

A value JSON has no form for is kept as its ``repr`` (a JSON string); text over the limit
becomes ``{"truncated": true, "length": N, "head": "..."}``, still valid JSON, so every reader
can parse what it finds.
"""

from __future__ import annotations

import reprlib
from typing import Any

import orjson

__all__ = ["RESULT_LIMIT", "result_json"]

RESULT_LIMIT = 4096
"""Bytes of JSON a run's result may take in the ledger."""

_OPTIONS = orjson.OPT_NON_STR_KEYS
# reprlib bounds the work of a repr of containers however large they are; an object's own
# ``__repr__`` is cut after the fact.
_REPR = reprlib.Repr()
_REPR.maxlevel = 4
_REPR.maxstring = _REPR.maxother = RESULT_LIMIT
for _name in ("maxdict", "maxlist", "maxtuple", "maxset", "maxfrozenset", "maxdeque", "maxarray"):
    setattr(_REPR, _name, 100)


def result_json(value: Any) -> str | None:
    """``value`` as bounded JSON text; ``None`` for ``None`` (a run that returned nothing)."""
    if value is None:
        return None
    try:
        text = orjson.dumps(value, option=_OPTIONS)
    except (orjson.JSONEncodeError, RecursionError):
        text = _repr_json(value)
    if len(text) <= RESULT_LIMIT:
        return text.decode()
    return _truncated(text)


def _repr_json(value: Any) -> bytes:
    try:
        text = _REPR.repr(value)
    except Exception as error:  # a broken __repr__ must not cost the run its record
        text = f"<{type(value).__name__}: repr raised {type(error).__name__}>"
    # A __repr__ may hand back lone surrogates, which no JSON text can hold.
    return orjson.dumps(text.encode("utf-8", "backslashreplace").decode())


def _truncated(text: bytes) -> str:
    """The note that replaces JSON text over the limit: its length and as much of its start as
    fits, cut where it stays valid UTF-8."""
    head = text[: RESULT_LIMIT - 64].decode(errors="ignore")
    while True:
        note = orjson.dumps({"truncated": True, "length": len(text), "head": head})
        excess = len(note) - RESULT_LIMIT
        if excess <= 0:
            return note.decode()
        # Escapes make the note longer than its head; each pass drops at least the excess.
        head = head[: max(len(head) - excess, 0)]
