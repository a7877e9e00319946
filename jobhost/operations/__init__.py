"""What operators ask of a host, built as data the CLI and the HTTP surface both print.

Each module answers one question and knows nothing of click: :mod:`.report` (what runs when,
what ran, what differs from what is declared), :mod:`.health` (the release gate),
:mod:`.history` (the ledger of one job), :mod:`.manual` (a manual run and its outcome),
:mod:`.pausing` (pause and resume), :mod:`.plan` (catalog against store), :mod:`.status` (a
job's status and the summary), :mod:`.selection` (filters and order); :mod:`.render` and
:mod:`.report_text` turn them into text for a terminal. :mod:`jobhost.web` serves them over HTTP.
"""

from __future__ import annotations
