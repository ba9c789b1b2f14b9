"""How much live work a server takes on: sessions at once and the lookahead, chosen from the machine.

Whisper's encoder is most of what a live decode costs, and how fast it runs decides what the live
defaults can afford. Measured with ``bench/live.py`` (whisper-base, 2 cores, docs/performance.md round
ten): on a CPU that computes bfloat16 natively (AVX-512 BF16), two sessions with speakers keep real
time (1.03-1.04 x) and one alone can spend the 3-s lookahead's 30-s window (final WER 11.5 -> 9.8 %).
On an AVX2-only CPU the encoder stays float32 (about 3.6 s for a 30-s window on one core of that
machine): two sessions with speakers fell to 1.73 x real time with words 24-29 s late, one alone to
1.13 x with the lookahead and 1.06-1.07 x without. A second session there only makes both late, so a server
left to choose (``LIVE_MAX_SESSIONS`` / ``LIVE_LOOKAHEAD_S`` unset or ``auto``) takes one session and no
lookahead on such a CPU; a value set is used as it is.

Sessions are admitted by what they cost (``session_cost``): ``max_sessions`` is how many sessions with
speakers run at once, and a text-only session, which runs no diarizer beside its decodes, costs two
thirds of one, so the room of two with speakers holds three text-only (three keep real time where two
with speakers do, bench/live.py --no-diarize).
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
