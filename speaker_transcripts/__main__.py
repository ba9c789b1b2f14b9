"""``python -m speaker_transcripts SUBCOMMAND ...``: the console command without its script."""

import sys

from speaker_transcripts.cli import main

sys.exit(main())
