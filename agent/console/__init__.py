"""The live web console of ``serve`` and ``cluster``: calls up now, history, messages, webhooks.

Runs in the process that supervises the agent (``serve``'s supervisor, ``cluster``), never in a
process that runs calls: a worker's crash does not take the console with it, and one console
sees every worker of a cluster. Live data crosses from the workers as datagrams
(:mod:`agent.console.feed` sends, :mod:`agent.console.receiver` receives) into the
:class:`~agent.console.hub.Hub`, which pushes it to browsers with server-sent events; everything
else is read from the call log. Imports no pjsua2 and no models.
"""
