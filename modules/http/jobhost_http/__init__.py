"""jobhost module ``http``: scheduled HTTP calls declared in configuration.

Each ``[[modules.http.jobs]]`` entry of ``jobhost.toml`` becomes a job (``http.<name>``) whose run
makes one call with the standard library, sends ``Idempotency-Key`` (job and occurrence, the same
for every retry), and fails on a status it did not expect. Registered through the ``jobhost``
entry point (:mod:`jobhost_http.plugin`).
"""
