"""Whether a live session keeps up with the audio it is sent, as events a client can show.

A session is behind by the audio it has received and not finished with (waiting, or in the step
running now). A decode of a turn's end can take a second or two, so that much lag is the normal beat
of a session in real time. Past ``SHED_S`` the session sheds interim decodes (``LiveSession.shedding``)
until it is back under ``CAUGHT_UP_S``: sessions sharing the models then leave each other the time for
their turns' final decodes (three text-only sessions on 2 cores: worst backlog 3.3 -> 1.8 s, wall over
audio 1.12 -> 1.08; a single session never gets there). Past ``BEHIND_S`` the words on screen are late
enough that a person should know: it says so once,
again as the lag grows or shrinks by ``REPORT_STEP_S``, and once more when it is back under
``CAUGHT_UP_S`` (well under ``BEHIND_S``, so a session on the edge does not flap between the two).
"""

from __future__ import annotations

from dataclasses import dataclass

from speaker_transcripts.live.events import Backlog

SHED_S = 2.0
BEHIND_S = 4.0
CAUGHT_UP_S = 1.5
REPORT_STEP_S = 2.0


@dataclass
class LagWatch:
    """Feed it the lag whenever it changes; it answers the ``Backlog`` event to send, if any."""

    behind_s: float = BEHIND_S
    caught_up_s: float = CAUGHT_UP_S
    report_step_s: float = REPORT_STEP_S
    shed_s: float = SHED_S
    reported: float | None = None  # the lag last reported while behind; None: not behind
    shedding: bool = False  # past ``shed_s``, until back under ``caught_up_s``

    @property
    def behind(self) -> bool:
        return self.reported is not None

    def observe(self, lag_s: float) -> Backlog | None:
        self.shedding = lag_s > self.shed_s or (self.shedding and lag_s >= self.caught_up_s)
        if self.reported is None:
            if lag_s <= self.behind_s:
                return None
        elif round(lag_s, 1) < self.caught_up_s:  # as reported: 1.46 s is not "1.5 s, caught up"
            self.reported = None
            return Backlog(round(lag_s, 1), behind=False)
        elif abs(lag_s - self.reported) < self.report_step_s:
            return None
        self.reported = lag_s
        return Backlog(round(lag_s, 1), behind=True)
