"""jobhost module ``http``: each ``[[modules.http.jobs]]`` entry of ``jobhost.toml`` becomes a
job (``http.<name>``) making one HTTP call with an ``Idempotency-Key``. Registered through the
``jobhost`` entry point (:mod:`jobhost_http.plugin`).
"""
