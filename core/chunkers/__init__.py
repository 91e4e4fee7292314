"""Chunkers: fixed windows, recursive paragraph-first, content-defined, structured, code.

What it may import: the standard library, ``rechunk.errors``, ``rechunk._optional`` (a
code grammar is imported on first use) and the chunking and reuse rooms; never the sync,
sources or live rooms.
"""

from rechunk.chunkers.base import BaseChunker
from rechunk.chunkers.cdc import CDCChunker
from rechunk.chunkers.code import CodeChunker, code_chunker_for, language_for
from rechunk.chunkers.fixed import FixedChunker
from rechunk.chunkers.recursive import RecursiveChunker
from rechunk.chunkers.structured import StructuredChunker

__all__ = [
    "BaseChunker",
    "CDCChunker",
    "CodeChunker",
    "FixedChunker",
    "RecursiveChunker",
    "StructuredChunker",
    "code_chunker_for",
    "language_for",
]
