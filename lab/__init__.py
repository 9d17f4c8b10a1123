"""The lab: what validates the gate rather than runs it (lab/README.md). Nothing below imports it."""
