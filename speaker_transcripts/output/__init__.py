"""Outputs a person reads: JSON, text, SRT and WebVTT writers with subtitle rules, and the speaker timeline plot."""
