"""Runtime jobs: jobs created, changed and removed while the hosts run, by kind."""

from __future__ import annotations
