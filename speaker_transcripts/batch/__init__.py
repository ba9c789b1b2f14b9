"""Bulk transcription on Ray Data: a corpus of recordings in, one row per file out, on one
machine or a cluster. ``inputs`` finds the files, ``results`` keeps the resumable record of rows,
``job`` runs the orchestrator in a pool of Ray actors (``speaker-transcripts batch``)."""
