"""Chunking: the chunk contract, token counting, policies and R_c measurement.

What it holds: :mod:`~rechunk.chunking.chunk` (``Chunk``, the ``Chunker`` protocol and the
embedding-input rule), :mod:`~rechunk.chunking.tokens` (token counters and the default
tokenizer), :mod:`~rechunk.chunking.policy` (named policies and their ids),
:mod:`~rechunk.chunking.measure` (edit fraction, bands and the recompute fraction R_c) and
:mod:`~rechunk.chunking.bench` (R_c of several chunkers over revision pairs). The chunkers
themselves live in :mod:`rechunk.chunkers`.

What it may import: the standard library, steadlith, tokenizers, ``rechunk.errors``,
``rechunk.chunkers`` and the reuse room (the hashes of ids, the ``Embedder`` a policy is
sized for); never the sync, sources or live rooms, and no framework.
"""
