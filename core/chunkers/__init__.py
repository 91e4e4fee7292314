"""Chunkers: fixed windows, recursive paragraph-first, content-defined, structured."""

from rechunk.chunkers.base import BaseChunker
from rechunk.chunkers.cdc import CDCChunker
from rechunk.chunkers.fixed import FixedChunker
from rechunk.chunkers.recursive import RecursiveChunker
from rechunk.chunkers.structured import StructuredChunker

__all__ = [
    "BaseChunker",
    "CDCChunker",
    "FixedChunker",
    "RecursiveChunker",
    "StructuredChunker",
]
