"""The assisted/batched choice for assisted="auto", on made-up timings."""

from __future__ import annotations

from speaker_transcripts.pipeline.decoding_policy import DecodingPolicy


def test_long_audio_is_always_batched():
    policy = DecodingPolicy(30.0)
    policy.record(True, 10.0, 0.1)  # assisted looks 10x faster...
    policy.record(False, 10.0, 1.0)
    assert policy.choose(30.0) is True
    assert policy.choose(30.1) is False and policy.choose(600.0) is False  # ...but never beyond the regime
    assert policy.choose(0.0) is False


def test_each_path_is_tried_once_then_the_faster_wins():
    policy = DecodingPolicy(30.0)
    assert policy.choose(8.0) is True
    policy.record(True, 8.0, 4.0)  # 0.5 s per audio second
    assert policy.choose(8.0) is False
    policy.record(False, 8.0, 2.0)  # 0.25
    assert policy.choose(5.0) is False
    assert policy.snapshot() == {"assisted": 0.5, "batched": 0.25}


def test_it_keeps_learning_and_ignores_what_it_does_not_decide():
    policy = DecodingPolicy(30.0)
    policy.record(True, 10.0, 5.0)
    policy.record(False, 10.0, 2.0)
    policy.record(False, 120.0, 1000.0)  # long audio says nothing about the short regime
    assert policy.snapshot()["batched"] == 0.2
    for _ in range(10):  # the batched path slows down (say, a busier machine): the choice follows
        policy.record(False, 10.0, 10.0)
    assert policy.choose(10.0) is True


def test_zero_threshold_disables_drafting():
    policy = DecodingPolicy(0.0)
    assert policy.choose(1.0) is False
