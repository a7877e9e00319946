"""jobhost module ``files``: removes files under a root directory that the application no longer
references.

Configured by ``[modules.files]`` in ``jobhost.toml``; registered through the ``jobhost``
entry point (:mod:`jobhost_files.plugin`). Its one job, ``files.orphan-cleanup``, walks root in
sorted, cursor-committed batches and quarantines (or deletes) every file older than ``min_age``
that the application's reference query does not return.
"""
