"""The run envelope: outcome mapping, spans, metrics and audit around every run."""
