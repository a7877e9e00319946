"""What operators ask of a host, built as data the CLI and the HTTP surface both print.

Each module answers one question and knows nothing of click: :mod:`.report` (what runs when,
what ran, what differs from what is declared), :mod:`.health` (the release gate),
:mod:`.history` (the ledger of one job), :mod:`.manual` (a manual run and its outcome),
:mod:`.pausing` (pause and resume), :mod:`.plan` (catalog against store); :mod:`.render` turns
them into 80-column text and :mod:`.http` serves probes, metrics and the report.
"""

from __future__ import annotations
