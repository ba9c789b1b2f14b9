"""When a live session says it is behind, how far, and that it caught up: pure logic, no models."""

from __future__ import annotations

from speaker_transcripts.live.backlog import LagWatch
from speaker_transcripts.live.events import Backlog


def test_the_normal_beat_of_a_session_says_nothing():
    watch = LagWatch()
    assert [watch.observe(lag) for lag in (0.0, 0.6, 1.8, 3.9, 0.2)] == [None] * 5
    assert not watch.behind


def test_behind_is_said_once_then_as_it_moves_then_caught_up_once():
    watch = LagWatch()
    said = [watch.observe(lag) for lag in (1.0, 4.5, 5.0, 6.0, 6.6, 8.0, 4.4, 2.0, 1.4, 0.3, 0.9)]
    assert said == [None, Backlog(4.5, True), None, None, Backlog(6.6, True), None, Backlog(4.4, True), Backlog(2.0, True),
                    Backlog(1.4, False), None, None]
    assert not watch.behind


def test_a_session_on_the_edge_does_not_flap():
    """Between the two thresholds nothing changes: behind stays behind, keeping up stays keeping up."""
    watch = LagWatch()
    said = [watch.observe(lag) for lag in (4.1, 3.0, 4.2, 2.5, 4.0)]
    assert said == [Backlog(4.1, True), None, None, None, None]
    assert watch.behind


def test_interim_decodes_are_shed_from_a_lag_too_small_to_report_until_it_is_caught_up():
    watch = LagWatch()
    shed = []
    for lag in (1.0, 1.9, 2.5, 3.0, 1.6, 1.4, 1.8):
        assert watch.observe(lag) is None  # never reported: under BEHIND_S
        shed.append(watch.shedding)
    assert shed == [False, False, True, True, True, False, False]


def test_caught_up_is_said_with_a_lag_under_the_threshold_as_reported():
    """A lag of 1.46 s would read "1.5 s, caught up" once rounded: it is still behind until it reads under 1.5."""
    watch = LagWatch()
    assert watch.observe(5.0) == Backlog(5.0, True)
    assert watch.observe(1.46) == Backlog(1.5, True)  # moved by 2 s or more: said, still behind
    assert watch.observe(1.44) == Backlog(1.4, False) and not watch.behind
