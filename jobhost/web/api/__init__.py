"""The HTTP API under ``/api/v1``, off unless ``api_tokens`` are configured: each endpoint a
row of :mod:`.openapi`'s table, mounted by :mod:`.routes` and described by that document."""
