"""What operators ask of a host, built as data the CLI and the HTTP surface both print.

One module per operator feature, knowing nothing of click; the CLI, the API and the dashboard
are thin adapters over them: :mod:`.jobs` (pause, resume, trigger; the stored catalog; a job's
state), :mod:`.runs` (retry, cancel, a manual run seen to its end; a job's ledger; a run's log),
:mod:`.backfills`, :mod:`.failures`, :mod:`.changes` (the change log and its reasons),
:mod:`.report` (what runs when, what ran, each job's status, the dashboard's overview),
:mod:`.mismatch` (what differs from what is declared), :mod:`.health` (the release gate),
:mod:`.plan` (catalog against store) and :mod:`.gauges` (the metrics). :mod:`.render` turns them
into text for a terminal; :mod:`jobhost.web` serves them over HTTP.
"""

from __future__ import annotations
