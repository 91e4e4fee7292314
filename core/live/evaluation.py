"""Retrieval quality on a fixed query set: miss rate at k and duplicate evidence in the top k.

The engine of ``rechunk eval``: pure Python over the :class:`rechunk.sync.store.VectorStore`
protocol's ``search`` and ``get_points_many`` (the caller embeds the queries). It is the
evidence the design asks for before an alias is switched to a new generation: run the
same queries against the live collection and a shadow one and compare.

Definitions (fixed, so that two runs and two generations compare):

- A query *hits* when one of its top ``k`` chunks belongs to the answer's ``doc_id``
  and, when the query gives a ``fragment``, that chunk's text contains the fragment
  (both with whitespace runs collapsed to one space, case-folded) as whole words: a
  fragment that starts or ends with a letter or digit is not found inside a longer word
  (``cat`` is not in ``concatenate``). A fragment that a
  chunk boundary cuts in two is found in no chunk: a miss, which is the point (the
  policy split the evidence). The miss rate is misses over queries.
- A chunk in the top ``k`` is *duplicate evidence* when a chunk ranked above it in the
  same answer repeats it: the same input key, or one text (whitespace collapsed,
  case-folded) containing the other as whole words (as fragments are found), or heavy
  overlap: the word 5-grams (words are
  ``\\w+`` runs, case-folded; a text of fewer than 5 words is one gram) that the two
  share are at least half of the smaller text's. The duplicate ratio is duplicate
  chunks over chunks returned.
- Per policy: a query counts under the policy its answer document is stored with (the
  ``policy`` of that doc_id's points; several joined with ``+``; ``absent`` when the
  collection holds no point of it, which is a miss); a duplicate chunk counts under its
  own point's policy, over the chunks returned of that policy.

Nothing in an :class:`EvalReport` holds a query, a fragment or a chunk's text; doc_ids
appear only in :meth:`EvalReport.to_dict` with ``show_text``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from rechunk.errors import ConfigError, InputError
from rechunk.sync.store import StoredPoint, VectorStore

__all__ = [
    "ABSENT",
    "GRAM",
    "OVERLAP",
    "EvalQuery",
    "EvalReport",
    "QueryResult",
    "duplicate_of",
    "evaluate",
    "read_queries",
]

#: words per gram in the overlap rule
GRAM = 5
#: share of the smaller text's grams two chunks must share to overlap heavily
OVERLAP = 0.5
#: the policy of a query whose answer document the collection does not hold
ABSENT = "absent"

_WORD = re.compile(r"\w+")


@dataclass(frozen=True)
class EvalQuery:
    """One line of the query set: the query, the doc_id that answers it, and optionally
    a fragment of text the answering chunk must contain. ``line`` is its 1-based line."""

    query: str
    doc_id: str
    fragment: str | None = None
    line: int = 0


def read_queries(path: str | Path) -> list[EvalQuery]:
    """The query set of a JSON-lines file (blank lines skipped); InputError on a bad line."""
    try:
        raw = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file; pass a JSON-lines query set") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(
            f"{path}: cannot be read as UTF-8 text ({exc.__class__.__name__})"
        ) from None
    queries: list[EvalQuery] = []
    for number, line in enumerate(raw.splitlines(), 1):
        if not line.strip():
            continue
        where = f"{path} line {number}"
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(f"{where}: not JSON ({exc.msg}); one object per line") from None
        if not isinstance(row, dict):
            raise InputError(f"{where}: not a JSON object; give query, doc_id and fragment")
        query, doc_id, fragment = row.get("query"), row.get("doc_id"), row.get("fragment")
        if not isinstance(query, str) or not query.strip():
            raise InputError(f"{where}: 'query' must be a non-empty string")
        if not isinstance(doc_id, str) or not doc_id:
            raise InputError(f"{where}: 'doc_id' must be a non-empty string")
        if fragment is not None and (not isinstance(fragment, str) or not fragment.strip()):
            raise InputError(f"{where}: 'fragment' must be a non-empty string when given")
        queries.append(EvalQuery(query, doc_id, fragment, number))
    if not queries:
        raise InputError(f"{path}: no query in it; write one JSON object per line")
    return queries


def _collapse(text: str) -> str:
    return " ".join(text.split())


def _holds(text: str, part: str) -> bool:
    """Whether ``part`` lies in ``text`` as whole words: where ``part`` starts (ends)
    with a word character, the character before (after) it in ``text`` is not one."""
    if part not in text:
        return False
    head = r"(?<!\w)" if _WORD.match(part[0]) else ""
    tail = r"(?!\w)" if _WORD.match(part[-1]) else ""
    return re.search(head + re.escape(part) + tail, text) is not None


def _grams(text: str) -> set[tuple[str, ...]]:
    words = _WORD.findall(text.casefold())
    if len(words) < GRAM:
        return {tuple(words)} if words else set()
    return {tuple(words[i : i + GRAM]) for i in range(len(words) - GRAM + 1)}


def duplicate_of(a: StoredPoint, b: StoredPoint) -> bool:
    """Whether two chunks are the same evidence: same input key, one text inside the
    other, or heavy word 5-gram overlap (see the module's rule)."""
    if a.payload.input_key == b.payload.input_key:
        return True
    ta, tb = _collapse(a.payload.text).casefold(), _collapse(b.payload.text).casefold()
    if not ta or not tb:
        return False
    if _holds(tb, ta) or _holds(ta, tb):
        return True
    ga, gb = _grams(ta), _grams(tb)
    if not ga or not gb:
        return False
    return len(ga & gb) >= OVERLAP * min(len(ga), len(gb))


@dataclass(frozen=True)
class QueryResult:
    """What one query found: the rank of its answer (1-based; None: a miss), the chunks
    returned and which of them are duplicate evidence, and the answer's policy."""

    line: int
    policy: str
    rank: int | None
    returned: int
    duplicates: int
    hit_policies: tuple[str, ...]
    duplicate_flags: tuple[bool, ...]


@dataclass
class _Tally:
    queries: int = 0
    misses: int = 0
    returned: int = 0
    duplicates: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "queries": self.queries,
            "misses": self.misses,
            "miss_rate": round(self.misses / self.queries, 4) if self.queries else None,
            "chunks": self.returned,
            "duplicates": self.duplicates,
            "duplicate_ratio": round(self.duplicates / self.returned, 4) if self.returned else None,
        }


@dataclass
class EvalReport:
    """The miss rate and duplicate ratio of one collection, overall and per policy."""

    collection: str
    k: int
    results: list[QueryResult] = field(default_factory=list)
    queries: Sequence[EvalQuery] = ()

    def _tallies(self) -> tuple[_Tally, dict[str, _Tally]]:
        total, per = _Tally(), dict[str, _Tally]()
        for r in self.results:
            for tally in (total, per.setdefault(r.policy, _Tally())):
                tally.queries += 1
                tally.misses += r.rank is None
            total.returned += r.returned
            total.duplicates += r.duplicates
            for policy, dup in zip(r.hit_policies, r.duplicate_flags):
                t = per.setdefault(policy, _Tally())
                t.returned += 1
                t.duplicates += dup
        return total, per

    @property
    def miss_rate(self) -> float:
        return sum(r.rank is None for r in self.results) / max(1, len(self.results))

    @property
    def duplicate_ratio(self) -> float:
        returned = sum(r.returned for r in self.results)
        return sum(r.duplicates for r in self.results) / max(1, returned)

    def to_dict(self, show_text: bool = False) -> dict[str, Any]:
        """Counts and rates; queries, fragments and doc_ids only with ``show_text``."""
        total, per = self._tallies()
        rows = []
        shown: Sequence[EvalQuery | None] = self.queries or [None] * len(self.results)
        for r, q in zip(self.results, shown):
            row: dict[str, Any] = {
                "line": r.line,
                "policy": r.policy,
                "rank": r.rank,
                "chunks": r.returned,
                "duplicates": r.duplicates,
            }
            if show_text and q is not None:
                row.update(query=q.query, doc_id=q.doc_id, fragment=q.fragment)
            rows.append(row)
        return {
            "collection": self.collection,
            "k": self.k,
            **total.to_dict(),
            "policies": {p: per[p].to_dict() for p in sorted(per)},
            "per_query": rows,
        }


def _answers(point: StoredPoint, query: EvalQuery) -> bool:
    if point.payload.doc_id != query.doc_id:
        return False
    if query.fragment is None:
        return True
    return _holds(_collapse(point.payload.text).casefold(), _collapse(query.fragment).casefold())


def evaluate(
    queries: Sequence[EvalQuery],
    store: VectorStore,
    vectors: Sequence[npt.NDArray[np.float32]],
    k: int = 5,
) -> EvalReport:
    """Search ``store`` with each query's vector (``vectors``, in the order of
    ``queries``: embedded by the model the collection was written with) and measure
    the top ``k``."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ConfigError(f"k must be a positive integer, not {k!r}")
    if len(vectors) != len(queries):
        raise ConfigError(f"{len(vectors)} vectors for {len(queries)} queries")
    held = store.get_points_many(sorted({q.doc_id for q in queries}))
    report = EvalReport(store.collection, k, queries=list(queries))
    for query, vector in zip(queries, vectors):
        policies = sorted({p.payload.policy for p in held.get(query.doc_id, [])})
        hits = [point for point, _ in store.search(vector, k)][:k]
        rank = next((i for i, p in enumerate(hits, 1) if _answers(p, query)), None)
        flags = tuple(
            any(duplicate_of(hits[i], hits[j]) for i in range(j)) for j in range(len(hits))
        )
        report.results.append(
            QueryResult(
                line=query.line,
                policy="+".join(policies) or ABSENT,
                rank=rank,
                returned=len(hits),
                duplicates=sum(flags),
                hit_policies=tuple(p.payload.policy for p in hits),
                duplicate_flags=flags,
            )
        )
    return report
