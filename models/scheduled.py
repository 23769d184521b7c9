"""The ``scheduler`` attribute of a model whose work runs as scheduler jobs (issue 44).

A process has one :class:`~models.scheduler.Scheduler`, made by the CLI from the config and
handed to every model :class:`~models.registry.ModelCache` builds (a constructor argument, so a
backend that loads one-thread twins only under pairing reads ``scheduler.pairs`` as it loads).
A model built directly, as tests do, gets a private one on first use. There is no module-level
scheduler to fall back on. Imports only :mod:`models.scheduler`.
"""

from __future__ import annotations

import threading

from models.scheduler import Scheduler

_MAKING = threading.Lock()


class Scheduled:
    """Mixin of the stage bases: the scheduler this model's jobs run on."""

    _scheduler: Scheduler | None = None

    @property
    def scheduler(self) -> Scheduler:
        """The one handed in (the process's), else this model's own, made on first use."""
        if self._scheduler is None:
            with _MAKING:  # two threads' first jobs must queue on one scheduler
                if self._scheduler is None:
                    self._scheduler = Scheduler()
        return self._scheduler

    @scheduler.setter
    def scheduler(self, scheduler: Scheduler | None) -> None:
        self._scheduler = scheduler
