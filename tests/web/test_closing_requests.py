"""Bytes a client sends after a request that ends its connection (HTTP/1.0, or HTTP/1.1 with
``Connection: close``) mean nothing by HTTP's rules: the server drops them and still sends the
answer whole, instead of parsing them as a broken second request and cutting the first answer
off. Checked over a real socket against the real server, with an application slow enough that
the extra bytes always arrive before its answer."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import Iterator

import pytest
from starlette.types import Receive, Scope, Send

from jobhost.web import WebServer

_ANSWER = json.dumps({"answered": True}).encode()


async def _slow_app(scope: Scope, receive: Receive, send: Send) -> None:
    await asyncio.sleep(0.5)
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(_ANSWER)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": _ANSWER})


@pytest.fixture(scope="module")
def port() -> Iterator[int]:
    server = WebServer(("127.0.0.1", 0), _slow_app)
    server.start()
    yield server.address[1]
    server.stop()


@pytest.mark.parametrize(
    "request_head",
    [b"GET / HTTP/1.0\r\n\r\n", b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"],
    ids=["HTTP/1.0", "HTTP/1.1 close"],
)
def test_bytes_after_a_closing_request_are_dropped_and_the_answer_arrives_whole(
    port: int, request_head: bytes
) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(request_head)
        time.sleep(0.1)  # the request is being answered when the stray bytes arrive
        sock.sendall(b'{"sent": "without a length"}' * 100)
        answer = bytearray()
        while chunk := sock.recv(65_536):
            answer.extend(chunk)
    head, _, body = bytes(answer).partition(b"\r\n\r\n")
    assert head.split(b"\r\n")[0].split(b" ")[1] == b"200", bytes(answer)[:300]
    assert body == _ANSWER
