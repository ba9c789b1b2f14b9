"""The outside probe's classes, a module per surface it attacks (``bench/probe.py`` runs them)."""
