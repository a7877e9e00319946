"""The ``jobhost`` command: one click group, one module per subject."""

from __future__ import annotations

from jobhost.cli._app import cli, main

__all__ = ["cli", "main"]
