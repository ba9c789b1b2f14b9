"""The evaluation harness (WER, attribution, cpWER, DER on a manifest) and its scores."""
