"""How much live work a server takes on: sessions at once and the lookahead, chosen from the machine.

Whisper's encoder is most of what a live decode costs, and how fast it runs decides what the live
defaults can afford: where it computes bfloat16 natively (AVX-512 BF16, a GPU) two sessions with
speakers keep real time and one alone can spend the lookahead; on an AVX2-only CPU a second session
only makes both late, so a server left to choose (``LIVE_MAX_SESSIONS`` / ``LIVE_LOOKAHEAD_S`` unset or
``auto``) takes one session and no lookahead there; a value set is used as it is (docs/performance.md,
"Live sessions").

Sessions are admitted by what they cost (``session_cost``): ``max_sessions`` is how many sessions with
speakers run at once, and a text-only session, which runs no diarizer beside its decodes, costs two
thirds of one, so the room of two with speakers holds three text-only.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LiveCapacity:
    """Live sessions a server runs at once (by cost: ``budget``), and the audio after a stopped turn its final decode hears."""

    max_sessions: int  # sessions with speakers at once
    lookahead_s: float

    @property
    def budget(self) -> int:
        """The cost of the sessions that may run at once (``session_cost``)."""
        return self.max_sessions * WITH_SPEAKERS_COST


WITH_SPEAKERS_COST = 3
TEXT_ONLY_COST = 2


def session_cost(diarize: bool) -> int:
    """What a live session costs of ``LiveCapacity.budget``."""
    return WITH_SPEAKERS_COST if diarize else TEXT_ONLY_COST


FAST_ENCODER = LiveCapacity(max_sessions=2, lookahead_s=3.0)
SLOW_ENCODER = LiveCapacity(max_sessions=1, lookahead_s=0.0)


def live_capacity(fast_encoder: bool, max_sessions: int | None = None, lookahead_s: float | None = None) -> LiveCapacity:
    """The settings given, each one left unset taken from what a machine with (``fast_encoder``) or
    without a fast Whisper encoder was measured to afford."""
    measured = FAST_ENCODER if fast_encoder else SLOW_ENCODER
    return LiveCapacity(
        max_sessions=measured.max_sessions if max_sessions is None else max_sessions,
        lookahead_s=measured.lookahead_s if lookahead_s is None else lookahead_s,
    )
