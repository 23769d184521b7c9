"""More calls than one process takes: kamailio in front of N supervised agent workers.

:mod:`agent.cluster.cluster` runs it all (``callagent cluster``), :mod:`agent.cluster.kamailio`
writes and runs kamailio, :mod:`agent.cluster.probe` pings SIP ports with OPTIONS,
:mod:`agent.cluster.metrics` is one worker's ``/metrics`` and :mod:`agent.cluster.aggregate`
the cluster's. ``deploy/`` holds systemd units and a multi-host example (see the README).
Nothing here imports pjsua2 or loads models.
"""
