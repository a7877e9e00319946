"""Runtime jobs: jobs created, changed and removed while the hosts run, by kind.

:mod:`.definition` is the body a job is written with; :mod:`.specs` turns it into a
:class:`~jobhost.catalog.JobSpec`, checked as a declaration is (the secrets it may read too);
:mod:`.service` is the one path every change takes (API and CLI); :mod:`.loading` joins the
stored jobs to the declared catalog; :mod:`.reload` keeps a running host, or ``jobhost serve``,
in step.
"""

from __future__ import annotations
