"""The HTTP API under ``/api/v1``: job kinds, jobs (declared and runtime), runs and changes.

Off unless ``api_tokens`` are configured. :func:`api_routes` gives the routes a web application
adds (each endpoint a row of :mod:`.table`), and checks tokens and scopes; :mod:`.openapi`
describes them; :mod:`.requests` reads bodies and queries and writes every error as
``application/problem+json``.
"""

from __future__ import annotations

from jobhost.web.api.routes import API_PREFIX, api_routes

__all__ = ["API_PREFIX", "api_routes"]
