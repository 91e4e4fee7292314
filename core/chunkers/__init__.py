"""Chunkers: fixed windows, recursive paragraph-first, content-defined."""
