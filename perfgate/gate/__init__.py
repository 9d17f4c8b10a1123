"""How a measurement is judged: settings, statistics, baselines, verdicts, reports."""
