"""The web dashboard: server-rendered pages, assets shipped in the package, actions audited.

:class:`~jobhost.web.console.pages.Console` holds the pages; ``Console(...).routes()`` are
added to the application by :mod:`jobhost.web.surfaces`.
"""
