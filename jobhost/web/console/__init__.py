"""The web dashboard: server-rendered pages, assets shipped in the package, actions audited."""
