"""What a restarting host does not load: alembic on a store already current, and WebSocket
libraries for its HTTP server, which speaks none. Each is a fair share of a start-up."""

from __future__ import annotations

import subprocess
import sys

_UPGRADE_TWICE = """
import sys
from jobhost.store import create_store_engine, upgrade
engine = create_store_engine(sys.argv[1])
first = upgrade(engine)
loaded_by_first = any(m.startswith("alembic") for m in sys.modules)
for name in [m for m in sys.modules if m.startswith("alembic")]:
    del sys.modules[name]
second = upgrade(engine)
print(first[0], first[1], second[0], second[1], loaded_by_first,
      any(m.startswith("alembic") for m in sys.modules))
"""

_SERVE = """
import sys, urllib.request, urllib.error
from starlette.applications import Starlette
from jobhost.web.server import WebServer
server = WebServer(("127.0.0.1", 0), Starlette())
server.start()
for _ in range(200):
    try:
        urllib.request.urlopen(f"http://127.0.0.1:{server.address[1]}/", timeout=1)
    except urllib.error.HTTPError:
        break
    except OSError:
        import time; time.sleep(0.05)
server.stop()
print(sorted(m for m in sys.modules if m.split(".")[0] in {"websockets", "wsproto"}))
"""


def test_an_upgrade_of_a_current_store_does_not_load_alembic(store_url: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _UPGRADE_TWICE, store_url],
        capture_output=True,
        text=True,
        check=True,
    )
    before, head, again, still, first_loaded, second_loaded = done.stdout.split()
    assert (before, first_loaded) == ("None", "True")  # the empty store was migrated
    assert (again, still, second_loaded) == (head, head, "False")


def test_the_http_server_loads_no_websocket_library() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _SERVE], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.strip() == "[]"
