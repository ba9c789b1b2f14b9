"""Pipeline stages (audio, speech gate, long form, ASR, diarization, attribution) and the orchestrator that runs them."""
