"""What operators ask of a host, built as data the CLI, the API and the dashboard print.

One module per operator feature, knowing nothing of click; :mod:`.render` turns them into text
for a terminal, :mod:`jobhost.web` serves them over HTTP.
"""

from __future__ import annotations
