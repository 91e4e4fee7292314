"""Chunkers: fixed windows, recursive paragraph-first, content-defined."""

from rechunk.chunkers.base import BaseChunker
from rechunk.chunkers.cdc import CDCChunker
from rechunk.chunkers.fixed import FixedChunker
from rechunk.chunkers.recursive import RecursiveChunker

__all__ = ["BaseChunker", "CDCChunker", "FixedChunker", "RecursiveChunker"]
