"""How a case is timed: the device clock, flushes, launches, modes, workers and rounds."""
