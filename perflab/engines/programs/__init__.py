"""Programs the engine's own Python runs on the host (sent on standard input, never imported here)."""
