"""``python -m speaker_transcripts SUBCOMMAND ...``: the console command without its script."""

from speaker_transcripts.cli import run

run()
