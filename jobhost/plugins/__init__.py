"""Plugin discovery: which modules offer jobs to this host, and what each of them returned.
Every failure is a :class:`PluginProblem` naming its plugin, never an exception."""

from __future__ import annotations

from jobhost.plugins.calls import (
    PluginJob,
    collect_audit_sinks,
    collect_jobs,
    collect_kinds,
    read_only,
)
from jobhost.plugins.discovery import PluginProblem, PluginSet, load_plugins

__all__ = [
    "PluginJob",
    "PluginProblem",
    "PluginSet",
    "collect_audit_sinks",
    "collect_jobs",
    "collect_kinds",
    "load_plugins",
    "read_only",
]
