"""An API body past ``api_body_limit`` is answered 413 however the client frames it, over a real
socket to the real server: announced by ``Content-Length`` (with spaces, repeated, over HTTP/1.0,
after ``Expect: 100-continue``) or sent chunked (with or without ``Expect``). A request framed
neither way carries no body by HTTP's rules, so whatever the client sends after its head is never
read: it is answered 411 naming the missing header, not 400 "Malformed JSON" about an empty
body the client never meant to send. The answer arrives whole, however much is still coming."""

from __future__ import annotations

import json
import re
import socket
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

from tests.api.api_support import SECRETS, served_api

SECRET = SECRETS["deployer"][0]
LIMIT = 65_536
BODY = b'{"kind": "http", "description": "' + b"a" * (4 * 1024 * 1024) + b'"}'
"""Four MiB of JSON: 64 times the limit, small enough to send quickly."""
_STATUS = re.compile(rb"^HTTP/1\.[01] (\d{3}) ", re.MULTILINE)


@pytest.fixture(scope="module")
def port(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    directory: Path = tmp_path_factory.mktemp("framing")
    store_url = f"sqlite:///{directory}/store.db"
    with served_api(store_url, plugins="http", api_body_limit=LIMIT) as (base, _):
        yield int(base.rsplit(":", 1)[1])


def head(version: str, *fields: str) -> bytes:
    lines = [
        f"PUT /api/v1/jobs/hooks.big HTTP/{version}",
        "Host: 127.0.0.1",
        f"Authorization: Bearer {SECRET}",
        "Content-Type: application/json",
        *fields,
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def chunked(body: bytes, size: int = 65_536) -> Iterator[bytes]:
    for start in range(0, len(body), size):
        piece = body[start : start + size]
        yield b"%x\r\n%s\r\n" % (len(piece), piece)
    yield b"0\r\n\r\n"


def exchange(port: int, request_head: bytes, body: Iterable[bytes]) -> tuple[int, dict[str, str]]:
    """Send ``request_head`` then ``body`` as a client would, reading the answer meanwhile (the
    server may answer, and stop reading, long before the body is sent); the final status (after
    any ``100 Continue``) and its JSON."""
    answer = bytearray()
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:

        def read() -> None:
            try:
                while chunk := sock.recv(65_536):
                    answer.extend(chunk)
            except OSError:
                pass

        reader = threading.Thread(target=read)
        reader.start()
        try:
            sock.sendall(request_head)
            for part in body:
                sock.sendall(part)
            sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass  # answered and closed while the body was still going out
        reader.join(30)
    statuses = [int(found) for found in _STATUS.findall(bytes(answer))]
    final = next(status for status in statuses if status >= 200)
    start = answer.index(b"\r\n\r\n", answer.index(f" {final} ".encode())) + 4
    document, _ = json.JSONDecoder().raw_decode(answer[start:].decode())
    return final, document


LENGTH = str(len(BODY))
FRAMINGS = {
    "content-length": (head("1.1", f"Content-Length: {LENGTH}"), [BODY]),
    "content-length after 100-continue": (
        head("1.1", f"Content-Length: {LENGTH}", "Expect: 100-continue"),
        [BODY],
    ),
    "content-length with spaces": (head("1.1", f"Content-Length:   {LENGTH}  "), [BODY]),
    "content-length twice": (
        head("1.1", f"Content-Length: {LENGTH}", f"Content-Length: {LENGTH}"),
        [BODY],
    ),
    "content-length over HTTP/1.0": (head("1.0", f"Content-Length: {LENGTH}"), [BODY]),
    "chunked": (head("1.1", "Transfer-Encoding: chunked"), chunked(BODY)),
    "chunked after 100-continue": (
        head("1.1", "Transfer-Encoding: chunked", "Expect: 100-continue"),
        chunked(BODY),
    ),
    "chunked in one chunk": (head("1.1", "Transfer-Encoding: chunked"), chunked(BODY, len(BODY))),
    "chunked beside a small content-length": (
        head("1.1", "Content-Length: 10", "Transfer-Encoding: chunked"),
        chunked(BODY),
    ),
}


@pytest.mark.parametrize("framing", FRAMINGS)
def test_an_oversized_body_is_413_however_it_is_framed(port: int, framing: str) -> None:
    request_head, body = FRAMINGS[framing]
    status, document = exchange(port, request_head, body)
    assert (status, document["title"]) == (413, "Body too large")
    assert f"larger than {LIMIT} bytes (api_body_limit)" in document["detail"]


@pytest.mark.parametrize(
    "request_head",
    [head("1.0"), head("1.1", "Connection: close")],
    ids=["HTTP/1.0", "HTTP/1.1"],
)
def test_a_body_sent_without_length_or_chunking_is_411_not_malformed_json(
    port: int, request_head: bytes
) -> None:
    status, document = exchange(port, request_head, [BODY])
    assert (status, document["title"]) == (411, "Length required")
    assert "Content-Length" in document["detail"]
    assert "Transfer-Encoding: chunked" in document["detail"]


def test_the_answer_to_a_client_still_sending_arrives_whole_every_time(port: int) -> None:
    # The server closes while the upload is still coming in: without a lingering close the
    # kernel resets the connection and, now and then, the answer's body never leaves.
    for _ in range(60):
        status, document = exchange(port, head("1.0"), [BODY])
        assert (status, document["title"]) == (411, "Length required")


def test_an_empty_body_with_its_length_is_still_malformed_json(port: int) -> None:
    status, document = exchange(port, head("1.1", "Content-Length: 0", "Connection: close"), [])
    assert (status, document["title"]) == (400, "Malformed JSON")
