"""A document's plan: the point ids and payloads of its chunks, and what to write and
delete so that the collection holds exactly them; the chunks its stored points prove (an
unchanged document is planned without being chunked again) and what its edit measures
(R_c, changed bytes)."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rechunk.chunking.chunk import Chunk, Chunker, embedding_input
from rechunk.chunking.measure import atoms, changed_blocks, recompute_fraction
from rechunk.document import Document, flat_problem, locator_as_text
from rechunk.errors import InputError
from rechunk.reuse.identity import input_key, point_id, text_revision
from rechunk.sync.report import DocumentReport
from rechunk.sync.store import RESERVED_METADATA_KEYS, PointPayload, PointWrite, StoredPoint


@dataclass
class _Plan:
    doc: Document
    chunks: list[Chunk]
    keys: list[str]
    ids: list[str]
    existing: dict[str, StoredPoint]
    writes: list[PointWrite]
    needs_vector: dict[str, str]  # input key -> text, for points that are new
    delete: list[str]
    report: DocumentReport
    # ids of existing points written again with a vector: theirs failed the vector check,
    # or is of another input than the point's key (see _plan)
    revector: frozenset[str] = frozenset()


def _payload(
    doc: Document,
    policy: str,
    model_id: str,
    key: str,
    ordinal: int,
    chunk: Chunk,
    neighbours: tuple[str | None, str | None] = (None, None),
    located: Mapping[str, Any] | None = None,
) -> PointPayload:
    """The payload of one chunk; ``located``: what ``doc.locator`` says of its span."""
    assert doc.revision is not None
    return PointPayload(
        doc_id=doc.doc_id,
        revision=doc.revision,
        policy=policy,
        input_key=key,
        model_id=model_id,
        ordinal=ordinal,
        start=chunk.start,
        end=chunk.end,
        tokens=chunk.tokens,
        text=chunk.text,
        version=doc.version,
        metadata={**(doc.metadata or {}), **located} if located else dict(doc.metadata or {}),
        previous_id=neighbours[0],
        next_id=neighbours[1],
    )


def _changed_bytes(old_texts: Sequence[str], new_texts: Sequence[str]) -> int:
    """UTF-8 bytes of the edit atoms (words, CJK characters, punctuation marks, as
    :func:`~rechunk.chunking.measure.edit_fraction` counts them) that the new inputs add or the
    stored ones lose. Whitespace is no edit. A line diff first (of the lines with their
    whitespace collapsed), then an atom diff inside each block of lines that differs, so a long
    paragraph costs only its changed words.

    Both diffs are :func:`~rechunk.chunking.measure.changed_blocks`: difflib's opcodes where the
    part that differs is small (every dev revision), anchored on unique lines or atoms
    above :data:`~rechunk.chunking.measure.DIFF_CELLS`, so the time grows about linearly with the
    document (a one-line edit of a 30 MB file: seconds, not hours)."""
    old_lines = "\n".join(old_texts).split("\n")
    new_lines = "\n".join(new_texts).split("\n")
    changed = 0
    # lines compared with whitespace collapsed: a reindented file's lines all match (else
    # the diff paired blocks of other lines, and counted their words as edits)
    for i1, i2, j1, j2 in changed_blocks(_collapsed(old_lines), _collapsed(new_lines)):
        before, after = atoms("\n".join(old_lines[i1:i2])), atoms("\n".join(new_lines[j1:j2]))
        for a1, a2, b1, b2 in changed_blocks(before, after):
            changed += len("".join(before[a1:a2]).encode("utf-8"))
            changed += len("".join(after[b1:b2]).encode("utf-8"))
    return changed


def _collapsed(lines: list[str]) -> list[str]:
    """Each line with its runs of whitespace as one space, none at its ends."""
    return [" ".join(line.split()) for line in lines]


def _typed(metadata: Mapping[str, Any]) -> str:
    """Metadata as JSON, in which values that Python finds equal but a store filters apart
    differ: ``1 == True == 1.0``, but ``where={"public": True}`` misses a 1."""
    return json.dumps(metadata, sort_keys=True)


def _same_types(stored: PointPayload, typed: str) -> bool:
    """Whether the metadata of a stored payload equal to a new one, whose metadata is
    ``typed`` (:func:`_typed`, once per document), also agrees with it in type (empty
    metadata, the common case, needs no JSON)."""
    return not stored.metadata or _typed(stored.metadata) == typed


def _stored_chunks(doc: Document, stored: list[StoredPoint], policy: str) -> list[Chunk] | None:
    """The chunks ``policy`` makes of ``doc``, read back from its stored points when they
    prove it: their revision is this text's hash (not a caller's label) and they were cut
    by the same policy (its id names the chunker, its parameters, its version and the
    tokenizer), with ordinals 0..n-1 whose spans tile the text from 0 to its end, each
    holding its span's embedding input (a point an adapter wrote holds the raw slice).
    Chunkers are deterministic, so these are the chunks chunking would make again; None
    otherwise.
    An unchanged document of a re-sync is then planned without being chunked."""
    if not stored or doc.revision != text_revision(doc.text):
        return None
    chunks: list[Chunk] = []
    position = 0
    for ordinal, point in enumerate(stored):  # ordered by (ordinal, id)
        p = point.payload
        if (
            p.ordinal != ordinal
            or p.start != position
            or p.end <= p.start
            or p.revision != doc.revision
            or p.policy != policy
            or p.text != embedding_input(doc.text[p.start : p.end])
        ):
            return None
        chunks.append(Chunk(p.start, p.end, p.text, p.tokens))
        position = p.end
    return chunks if position == len(doc.text) else None


def _located(doc: Document, chunk: Chunk) -> Mapping[str, Any] | None:
    """What ``doc.locator`` says of ``chunk``'s span (None without a locator), checked to
    be flat metadata that every store holds and that uses no key rechunk owns."""
    if doc.locator is None:
        return None
    located = doc.locator(chunk.start, chunk.end)
    where = f"document {doc.doc_id!r}: locator({chunk.start}, {chunk.end})"
    if not isinstance(located, Mapping):
        raise InputError(f"{where} returned a {type(located).__name__}, not a mapping")
    problem = flat_problem(located, where)
    clash = RESERVED_METADATA_KEYS & set(located)
    if clash:
        problem = f"{where}: keys {sorted(clash)} are reserved by rechunk"
    if problem:
        raise InputError(problem)
    return located


def _plan(
    doc: Document,
    chunks: list[Chunk],
    chunker: Chunker,
    model_id: str,
    stored: list[StoredPoint],
    neighbours: bool = False,
    revector: frozenset[str] = frozenset(),
    text_locators: bool = False,
) -> _Plan:
    """What to write and delete so that the store holds exactly ``chunks`` of ``doc``.
    ``neighbours``: the store keeps each point's PREVIOUS / NEXT ids (a point whose
    neighbour changed is updated, payload only). ``revector``: ids of stored points whose
    vector failed the vector check; each is written again, with a vector, as if absent.
    ``text_locators``: the store holds locators as text (:func:`locator_as_text`)."""
    existing = {p.id: p for p in stored}
    policy = chunker.policy_id  # a hash of the chunker's settings: once per document
    report = DocumentReport(doc.doc_id, "new" if not existing else "changed", doc.revision)
    report.policy = policy
    plan = _Plan(doc, chunks, [], [], existing, [], {}, [], report, revector)
    newest = max(
        (p.payload.version for p in existing.values() if p.payload.version is not None),
        default=None,
    )
    if doc.version is not None and newest is not None and newest > doc.version:
        report.status = "skipped"
        report.reason = f"store holds version {newest} > {doc.version}"
        return plan
    typed = _typed(doc.metadata or {})
    occurrences: Counter[str] = Counter()
    for chunk in chunks:
        key = input_key(model_id, chunk.text)
        plan.keys.append(key)
        plan.ids.append(point_id(doc.doc_id, key, occurrences[key]))
        occurrences[key] += 1
    # a stored point keeps its vector only when it is of its key: a framework pipeline may
    # have embedded another string than the one its splitter keyed, and a store's decoding
    # gives the key of what the point's content shows was embedded
    plan.revector = revector | {
        pid
        for pid, key in zip(plan.ids, plan.keys)
        if pid in existing and existing[pid].payload.input_key != key
    }
    last = len(chunks) - 1
    for ordinal, (chunk, key, pid) in enumerate(zip(chunks, plan.keys, plan.ids)):
        around: tuple[str | None, str | None] = (None, None)
        if neighbours:
            around = (
                plan.ids[ordinal - 1] if ordinal else None,
                plan.ids[ordinal + 1] if ordinal < last else None,
            )
        located = _located(doc, chunk)
        if located is not None and text_locators:
            located = locator_as_text(located)
        payload = _payload(doc, policy, model_id, key, ordinal, chunk, around, located)
        current = existing.get(pid)
        if current is None or pid in plan.revector:
            plan.writes.append(PointWrite(pid, payload, None))
            plan.needs_vector.setdefault(key, chunk.text)
            report.added += 1
        elif current.payload != payload or not _same_types(
            current.payload, typed if located is None else _typed(payload.metadata)
        ):
            plan.writes.append(PointWrite(pid, payload, None))
            report.updated += 1
        else:
            report.kept += 1
    new_ids = set(plan.ids)
    plan.delete = [pid for pid in existing if pid not in new_ids]
    report.deleted = len(plan.delete)
    report.chunks = len(chunks)
    if existing and not plan.writes and not plan.delete:
        report.status = "unchanged"
    distinct = {key: chunk.tokens for key, chunk in zip(plan.keys, chunks)}
    report.tokens_total = sum(distinct.values())
    if existing and report.status != "unchanged":
        old = sorted(existing.values(), key=lambda p: (p.payload.revision, p.payload.ordinal))
        old_chunks = [Chunk(0, 0, p.payload.text, p.payload.tokens) for p in old]
        report.recompute_fraction = recompute_fraction(old_chunks, chunks)
        current_old = [p.payload.text for p in old]
        report.changed_bytes = _changed_bytes(current_old, [c.text for c in chunks])
    elif report.status == "unchanged":
        report.recompute_fraction = 0.0
    return plan
