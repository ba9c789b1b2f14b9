"""Scoring a clip against a recording's speakers, three ways, on the channel cases of
``bench/enrolment_channels.py``: which one separates people from impostors best?

    .venv/bin/python bench/enrolment_scoring.py [--shared ../shared/dev-audio] [--channels NAME...] [--out scoring.json]

Every way embeds the clip band-matched to the recording, as the product does (``pipeline/bandwidth.py``):
- ``whole clip`` (the product): the cosine of the clip's embedding with the speaker's;
- ``best sub-clip``: the clip, its halves and its thirds (each at least 1.5 s) embedded apart, the
  highest cosine kept (a stretch of the clip with a cough or a second voice should not spoil it);
- ``S-norm``: the cosine normalised against a cohort (symmetric adaptive score normalisation): the
  clip's and the speaker's mean and spread of cosines with the 10 closest cohort voices (the impostor
  pool's voices that are neither the person nor in the recording), the two z-scores averaged.

Scores are not comparable across ways, so each is judged by what a threshold could do with it: per
channel, the share of genuine pairs (a person's clip, the speaker covering most of their speech)
that score above every impostor pair (a clip of somebody absent, against every speaker), and the
equal error rate.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

REPOSITORY = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPOSITORY))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from enrolment_channels import CHANNELS, cosine, heard_through, setup

COHORT = 10
MIN_SUB_CLIP_S = 1.5
WAYS = ("whole clip", "best sub-clip", "S-norm")


def main(argv: list[str] | None = None) -> int:
    arguments, pipeline, embed, cases, pool = setup(__doc__, argv)
    from enrolment import _most_overlapped

    from speaker_transcripts.pipeline.audio import SAMPLING_RATE
    from speaker_transcripts.pipeline.bandwidth import is_narrowband, telephone_band
    from speaker_transcripts.pipeline.diarization import diarize

    def pieces(clip: np.ndarray) -> list[np.ndarray]:
        """The clip, its halves and its thirds, each at least MIN_SUB_CLIP_S long."""
        found = [clip]
        for parts in (2, 3):
            if len(clip) / parts >= MIN_SUB_CLIP_S * SAMPLING_RATE:
                found += np.array_split(clip, parts)
        return found

    embedded: dict[tuple[str, bool], list[np.ndarray]] = {}  # (voice, band-matched) -> [whole, sub-clips...]

    def voice(name: str, clip: np.ndarray, narrow: bool) -> list[np.ndarray]:
        if (name, narrow) not in embedded:
            embedded[name, narrow] = [embed(telephone_band(piece) if narrow else piece) for piece in pieces(clip)]
        return embedded[name, narrow]

    figures: dict[str, dict[str, Any]] = {}
    for channel in arguments.channels:
        trials: dict[str, dict[str, list[float]]] = {way: {"genuine": [], "impostor": []} for way in WAYS}
        for case in cases:
            heard = case["samples"] if CHANNELS[channel] is None else heard_through(case["samples"], *CHANNELS[channel])
            found = diarize(pipeline, heard, SAMPLING_RATE, {})
            narrow = is_narrowband(heard)
            present = {turn.speaker for turn in case["turns"]}
            absent = {name: clip for name, clip in pool.items() if name not in present and name not in case["genuine"]}
            references = {**{name: voice(f"{case['name']}:{name}", clip, narrow) for name, clip in case["genuine"].items()},
                          **{name: voice(name, clip, narrow) for name, clip in absent.items()}}
            cohort = np.stack([voice(name, clip, narrow)[0] for name, clip in absent.items()])
            owners = {label: _most_overlapped([turn for turn in found.timeline if turn.speaker == label], case["turns"])
                      for label in found.embeddings}
            for name, reference in references.items():
                genuine = name in case["genuine"]
                labels = [label for label, owner in owners.items() if owner == name] if genuine else list(found.embeddings)
                if not labels:
                    continue
                for way in WAYS:
                    others = cohort if genuine else np.stack([row for other, row in zip(absent, cohort) if other != name])
                    score = max(_score(way, found.embeddings[label], reference, others) for label in labels)
                    trials[way]["genuine" if genuine else "impostor"].append(score)
            print(f"{channel:20s} {case['name']:18s} narrowband={narrow}", flush=True)
        figures[channel] = {way: _judge(scores) for way, scores in trials.items()}
    print(f"\n{'channel':20s} {'way':14s} {'genuine above every impostor':>30s} {'EER':>6s}")
    for channel, ways in figures.items():
        for way, judged in ways.items():
            print(f"{channel:20s} {way:14s} {judged['above_every_impostor']:>22d} of {judged['genuine']:<5d} {judged['eer']:>6.1%}")
    if arguments.out:
        arguments.out.write_text(json.dumps(figures, indent=1))
    return 0


def _score(way: str, speaker: np.ndarray, reference: list[np.ndarray], cohort: np.ndarray) -> float:
    if way == "whole clip":
        return cosine(speaker, reference[0])
    if way == "best sub-clip":
        return max(cosine(speaker, piece) for piece in reference)
    raw = cosine(speaker, reference[0])
    return 0.5 * (_z(raw, speaker, cohort) + _z(raw, reference[0], cohort))


def _z(raw: float, vector: np.ndarray, cohort: np.ndarray) -> float:
    """``raw`` against the cosines of ``vector`` with its closest cohort voices."""
    unit = cohort / np.linalg.norm(cohort, axis=1, keepdims=True)
    closest = np.sort(unit @ (vector / np.linalg.norm(vector)))[-COHORT:]
    return float((raw - closest.mean()) / max(float(closest.std()), 1e-6))


def _judge(scores: dict[str, list[float]]) -> dict[str, Any]:
    genuine, impostor = np.array(scores["genuine"]), np.array(scores["impostor"])
    thresholds = np.unique(np.concatenate([genuine, impostor]))
    rates = [(np.mean(genuine < threshold), np.mean(impostor >= threshold)) for threshold in thresholds]
    eer = min(rates, key=lambda pair: abs(pair[0] - pair[1]))
    return {"genuine": len(genuine), "impostor": len(impostor), "above_every_impostor": int(np.sum(genuine > impostor.max())),
            "eer": float(np.mean(eer)), "genuine_median": float(np.median(genuine)), "impostor_max": float(impostor.max())}


if __name__ == "__main__":
    sys.exit(main())
