"""Data: corpus sources (read + validate), token-budget mixing, packing, the resumable training stream."""
