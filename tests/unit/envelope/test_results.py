"""A run's Success value as the ledger keeps it: JSON, bounded, and valid JSON whatever it was."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime

from jobhost.envelope.envelope import RESULT_LIMIT, result_json


class _Opaque:
    def __repr__(self) -> str:
        return "<Opaque x=1>"


class _Loud:
    def __repr__(self) -> str:
        return "y" * 100_000


class _Broken:
    def __repr__(self) -> str:
        raise RuntimeError("no")


@dataclass
class _Counts:
    reminded: int


def test_a_json_value_is_kept_as_its_json() -> None:
    assert result_json({"reminded": 10}) == '{"reminded":10}'
    assert result_json("ok") == '"ok"'
    assert result_json([1, 2.5, True]) == "[1,2.5,true]"
    assert result_json({1: "a"}) == '{"1":"a"}'


def test_nothing_returned_keeps_nothing() -> None:
    assert result_json(None) is None


def test_dates_and_dataclasses_are_json_too() -> None:
    assert json.loads(result_json(_Counts(3)) or "") == {"reminded": 3}
    assert json.loads(result_json(datetime(2026, 12, 1, tzinfo=UTC)) or "") == (
        "2026-12-01T00:00:00+00:00"
    )


def test_a_value_with_no_json_form_is_its_repr() -> None:
    assert json.loads(result_json(_Opaque()) or "") == "<Opaque x=1>"
    assert json.loads(result_json({"when": {1, 2}, "what": _Opaque()}) or "") == (
        "{'what': <Opaque x=1>, 'when': {1, 2}}"
    )
    assert json.loads(result_json(_Broken()) or "").startswith("<_Broken instance at 0x")


def test_a_long_value_is_cut_to_a_valid_note_of_its_length() -> None:
    text = result_json({"rows": list(range(5000))}) or ""

    note = json.loads(text)
    assert len(text.encode()) <= RESULT_LIMIT
    assert note["truncated"] is True
    assert note["length"] == len(json.dumps({"rows": list(range(5000))}, separators=(",", ":")))
    assert note["head"].startswith('{"rows":[0,1,2,')


def test_escapes_and_wide_characters_never_push_the_note_past_the_limit() -> None:
    for value in ['"' * 10_000, "\x00" * 10_000, "é€😀" * 5_000]:
        text = result_json(value) or ""
        assert len(text.encode()) <= RESULT_LIMIT
        assert json.loads(text)["truncated"] is True


def test_a_long_repr_is_bounded_as_well() -> None:
    text = result_json(_Loud()) or ""
    assert len(text.encode()) <= RESULT_LIMIT
    assert json.loads(text)["truncated"] is True
    assert result_json("\udc80") is not None
