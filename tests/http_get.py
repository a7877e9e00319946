"""Plain HTTP GETs against a server a test started: status and body, error statuses included."""

from __future__ import annotations

import urllib.error
import urllib.request

__all__ = ["answers", "get"]


def get(url: str) -> tuple[int, str, str]:
    """(status, content type, body) of a GET, error statuses included."""
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.headers["Content-Type"], response.read().decode()
    except urllib.error.HTTPError as error:
        with error:
            return error.code, error.headers["Content-Type"], error.read().decode()


def answers(url: str) -> bool:
    """Whether a server answers at ``url`` at all (ready or not yet: 200 or 503)."""
    try:
        return get(url)[0] in {200, 503}
    except OSError:
        return False
