"""Redacting and bounding error text: ``python benchmarks/redaction.py``.

Every outcome's error message passes through ``redact_text`` on its way to the ledger and the
log, so its cost on a long message is the cost of one run finishing. Printed per text: the
length, the time of ``redact_text`` and of ``bound_text``, and, for the shorter texts only, the
time the single regular expression it replaced took (it grows with the square of the length:
73 s for a 300 kB message on the machine where the problem was found).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable

from jobhost_contracts import bound_text, redact_text

_OLD = re.compile(r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]*://[^:/@\s]*):[^@\s]*@")
_OLD_UP_TO = 40_000  # characters; the old pattern takes too long beyond


def _texts() -> list[tuple[str, str]]:
    words = "connection to postgresql://app:S3cretPW@db/app failed, retrying "
    return [
        ("letters, 30 kB", "a" * 30_000),
        ("letters, 300 kB", "a" * 300_000),
        ("letters, 5 MB", "a" * 5_000_000),
        ("prose with URLs, 5 MB", words * (5_000_000 // len(words))),
        ("'x://u:' repeated, 5 MB", "x://u:" * (5_000_000 // 6)),
        ("'a://' repeated, 4 MB", "a://" * 1_000_000),
    ]


def _seconds(call: Callable[[], object]) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def main() -> None:
    print(f"{'text':28} {'chars':>10} {'redact_text':>12} {'bound_text':>11} {'old pattern':>12}")
    for name, text in _texts():
        new = _seconds(lambda text=text: redact_text(text))
        cut = _seconds(lambda text=text: bound_text(text))
        old = "-"
        if len(text) <= _OLD_UP_TO:
            old = f"{_seconds(lambda text=text: _OLD.sub('***', text)):.3f}s"
        print(f"{name:28} {len(text):>10} {new:>11.3f}s {cut:>10.6f}s {old:>12}")


if __name__ == "__main__":
    main()
