"""The fast JSON writer writes what ``json.dumps(data, indent=2)`` writes, character for
character: the report's ``--json`` text is a promise, its layout included."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from jobhost.operations.render import indented

_LEAVES = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(min_value=-1e6, max_value=1e6, allow_nan=False).map(lambda x: round(x, 3))
    | st.text()
)
_DOCUMENTS = st.recursive(
    _LEAVES,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=30,
)


@given(_DOCUMENTS)
def test_indented_writes_what_json_dumps_writes(document: object) -> None:
    assert indented(document) == json.dumps(document, indent=2)


def test_characters_beyond_ascii_are_escaped_as_json_escapes_them() -> None:
    document = {"név": "caf\u00e9 \U0001f600 \x7f \x01 \n", "empty": [], "none": {}}
    text = indented(document)
    assert text == json.dumps(document, indent=2)
    assert "\\ud83d\\ude00" in text
    assert text.isascii()
