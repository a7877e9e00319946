"""Plugin discovery: which modules offer jobs to this host, and what each of them returned.
Every failure is a :class:`~jobhost.plugins.discovery.PluginProblem` naming its plugin, never an
exception."""
