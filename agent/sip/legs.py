"""Joining two of the agent's calls: a REFER with Replaces, or their audio bridged.

An attended transfer (:mod:`agent.call.consult`) has the caller on one call and the target on
another, both the agent's. :class:`CallJoins` (a mixin of
:class:`~agent.sip.useragent.SipAgent`) joins them, on the ``sip`` thread like every pj call:

* :meth:`CallJoins.transfer_replaces`: ``Call.xferReplaces``, a REFER to the caller whose
  Refer-To names the target with ``?Replaces=`` the target call's dialog: the caller's phone
  calls the target, which swaps the agent's call for it. Its progress comes as
  :class:`~agent.sip.events.TransferStatus` events, as a blind transfer's does.
* :meth:`CallJoins.bridge`: for a caller whose phone refuses the REFER. The two calls' streams
  transmit to each other through the conference bridge, and the agent's own ports no longer
  transmit to them (they still receive, so the calls' inbound clocks and recordings go on).
  One :class:`~agent.sip.events.Bridged` event says whether it worked. A re-INVITE that makes a
  new stream for one of them (hold, codec change) is not re-bridged: the agent's port is
  wired to it again, as for any call.

With :mod:`agent.sip.useragent`, :mod:`agent.sip.callbacks` and :mod:`agent.sip.pjconfig`, the
only pjsua2 importers. Must not import models, the session or the database.
"""

from __future__ import annotations

import queue
import time
from collections.abc import Callable

import pjsua2 as pj

from agent.sip.callbacks import _Call, error_text
from agent.sip.events import Bridged, SipEvent, TransferStatus


class CallJoins:
    """Commands that join one of the agent's calls with another (any thread)."""

    _calls: dict[int, _Call]
    _cmds: queue.SimpleQueue[Callable[[], None]]
    _emit: Callable[[SipEvent], None]

    def transfer_replaces(self, key: int, other: int) -> None:
        """Attended transfer: REFER call ``key`` to the party of call ``other``, with Replaces.

        Progress comes as :class:`TransferStatus` events of ``key``, the last ``final``; one
        that could not be sent ends at once with a final 500. Both calls stay up whatever the
        outcome (the target's side normally ends ``other`` once it is replaced).
        """
        def do() -> None:
            reason = self._replaces(key, other)
            if reason:
                self._emit(TransferStatus(key, 500, reason, True, time.monotonic()))
        self._cmds.put(do)

    def bridge(self, key: int, other: int) -> None:
        """Let calls ``key`` and ``other`` hear each other; one :class:`Bridged` event follows."""
        def do() -> None:
            reason = self._join_audio(key, other)
            self._emit(Bridged(key, other, not reason, reason or "bridged", time.monotonic()))
        self._cmds.put(do)

    # Own methods, so that no frame of the command's closure keeps a Call alive (SIP.md).
    def _replaces(self, key: int, other: int) -> str:
        call, dest = self._calls.get(key), self._calls.get(other)
        if call is None or dest is None:
            return f"no such call: {key if call is None else other}"
        try:
            call.xferReplaces(dest, pj.CallOpParam())
        except pj.Error as e:
            return error_text(e)
        return ""

    def _join_audio(self, key: int, other: int) -> str:
        a, b = self._calls.get(key), self._calls.get(other)
        if a is None or b is None:
            return f"no such call: {key if a is None else other}"
        try:
            media_a = a.getAudioMedia(a.audio_index)
            media_b = b.getAudioMedia(b.audio_index)
            for call, media in ((a, media_a), (b, media_b)):
                if call.port is not None:
                    call.port.stopTransmit(media)  # the agent's voice leaves both lines
            media_a.startTransmit(media_b)
            media_b.startTransmit(media_a)
        except pj.Error as e:
            return error_text(e)
        return ""
