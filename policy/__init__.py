"""Pure functions of codecs values: the projection, the per-request digest, the outcome plan,
the prompt text and what a call costs (no I/O, no anyio, no logging)."""
