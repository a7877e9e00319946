"""jobhost module ``files``: its one job, ``files.orphan-cleanup``, quarantines (or deletes) the
files under a root directory that the application no longer references.

Configured by ``[modules.files]`` in ``jobhost.toml``; registered through the ``jobhost``
entry point (:mod:`jobhost_files.plugin`).
"""
