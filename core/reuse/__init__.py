"""Reuse: what makes a vector reusable, and where reusable vectors are kept.

What it holds: :mod:`~rechunk.reuse.identity` (input keys, point ids, text revisions),
:mod:`~rechunk.reuse.embedding` (the ``Embedder`` protocol and the checks every text and
vector passes), :mod:`~rechunk.reuse.cache` (the memory and SQLite reuse caches) and
:mod:`~rechunk.reuse.cached_embedder` (an embedder that asks the cache first).

What it may import: the standard library, numpy and ``rechunk.errors``: no other room
(the others build on this one), and no framework.
"""
