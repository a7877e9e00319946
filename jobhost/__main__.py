"""``python -m jobhost``: the same as the ``jobhost`` command."""

from __future__ import annotations

from jobhost.cli import main

if __name__ == "__main__":
    main()
