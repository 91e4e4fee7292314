"""Index generations: a policy change builds a shadow collection, then switches an alias.

A generation is a collection named ``<alias>__<policy id>`` (with ``__<model hash>``
appended when that name already holds another model's vectors). Applications query
the alias; :func:`reindex` builds the next generation beside the live one
(reusing every vector whose input is unchanged, from the cache or from the live
collection), verifies it, and switches the alias in one atomic request (Qdrant).
Chroma has no aliases: the new generation is built and verified the same way
and the report names it; the application switches the collection it opens.
"""

from __future__ import annotations

import hashlib
import re
import warnings
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol, runtime_checkable

from rechunk.chunking.chunk import Chunker
from rechunk.document import Document
from rechunk.errors import CollectionMismatchError, ConfigError, InputError, StoreError
from rechunk.reuse.cache import EmbeddingCache
from rechunk.reuse.embedding import Embedder
from rechunk.sync.engine import sync
from rechunk.sync.inputs import check_flags, check_inputs, check_parts, lends_to
from rechunk.sync.report import Progress, SyncReport
from rechunk.sync.store import VectorStore

__all__ = [
    "GenerationalStore",
    "NewerGenerationWarning",
    "ReindexReport",
    "generation_name",
    "generations",
    "live_policy_kind",
    "open_live",
    "reindex",
]


@runtime_checkable
class GenerationalStore(VectorStore, Protocol):
    """A store that can open other collections of its client, list them and drop them."""

    def with_collection(self, name: str) -> GenerationalStore: ...

    def collections(self) -> list[str]: ...

    def drop_collection(self) -> None: ...


#: what generation_name() and a twin's letter append to an alias (policy ids are
#: ``<kind>-<12 hex>``): so that "docs" never claims "docs__x"'s generations
_GENERATION_SUFFIX = r"__[A-Za-z][A-Za-z0-9.]*-[0-9a-f]{12}(?:__[0-9a-f]{8})?(?:__[b-z])?"


def generation_name(alias: str, policy_id: str, model_id: str | None = None) -> str:
    """``<alias>__<policy id>``: the collection of one generation.

    With ``model_id``, ``<alias>__<policy id>__<model hash>``: the generation of
    that policy for a model other than the one the plain name holds.
    """
    if model_id is None:
        return f"{alias}__{policy_id}"
    return f"{alias}__{policy_id}__{hashlib.sha256(model_id.encode()).hexdigest()[:8]}"


def generations(store: Any) -> list[str]:
    """The generation collections of the name ``store`` is opened on, sorted (none when
    the store cannot list its collections)."""
    collections = getattr(store, "collections", None)
    if not callable(collections):
        return []
    pattern = re.compile(re.escape(store.collection) + _GENERATION_SUFFIX)
    return sorted(name for name in collections() if pattern.fullmatch(name))


def _holds_other_model(store: Any, embedder: Embedder) -> bool:
    """True when ``store``'s collection exists and holds another model's vectors."""
    info = store.collection_info()
    if info is None:
        return False
    return info.dimension != embedder.dimension or bool(info.model_ids - {embedder.model_id})


def _lends_to(store: Any, model_id: str) -> bool:
    """Whether ``store``'s collection exists and may hold vectors of ``model_id`` (it holds
    that model's points, or no rechunk point yet)."""
    info = store.collection_info()
    return info is not None and lends_to(info, model_id)


def _aliases(store: Any) -> dict[str, str] | None:
    aliases = getattr(store, "aliases", None)
    return aliases() if callable(aliases) else None


def _live_generation(aliases: dict[str, str] | None, name: str) -> str | None:
    """``"<policy id>[__<model hash>]"`` of the generation alias ``name`` points at, or
    None: no such alias, or one the application manages (its collection is not named
    ``<name>__...``)."""
    target = (aliases or {}).get(name)
    if target is None or not target.startswith(f"{name}__"):
        return None
    return target[len(name) + 2 :]


def live_policy_kind(store: Any) -> str | None:
    """The kind of policy (``"cdc"``) the generation ``store.collection``'s alias points at
    was built with, or None: no alias, or one the application manages."""
    live = _live_generation(_aliases(store), store.collection)
    if live is None:
        return None
    return live.split("-")[0] or None


def check_live_policy(
    store: Any,
    chunker: Chunker,
    aliases: dict[str, str] | None = None,
    dimension: int | None = None,
) -> str | None:
    """The live generation (``"<policy id>[__...]"``) of the alias ``store`` is opened on,
    or None (no such alias, or one the application manages); :class:`ConfigError` when
    it was built with another policy than ``chunker``'s (that change is a
    :func:`reindex`), unless, given the model's ``dimension``, a sync would replace it
    (:func:`_replaceable`). Reads only: a dry run checks what the sync would refuse."""
    if aliases is None:
        aliases = _aliases(store)
    name = store.collection
    live = _live_generation(aliases, name)  # None: an alias the application manages
    if live is None or aliases is None:
        return None
    expected = generation_name(name, chunker.policy_id)
    if dimension is not None and _replaceable(store, chunker, aliases, dimension):
        return live
    if not (aliases[name] == expected or aliases[name].startswith(expected + "__")):
        built, wanted = live.split("-")[0], chunker.policy_id.split("-")[0]
        # the same policy with other settings: another model's window, or other sizes
        how = (
            "the model and sizes it was built with"
            if built == wanted
            else f"the policy it was built with (--policy {built}; in Python "
            f"rechunk.policy_for(embedder, {built!r}))"
        )
        raise ConfigError(
            f"{name!r} points at generation {aliases[name]!r}, built with policy "
            f"{live.split('__')[0]}, not {chunker.policy_id}: sync with {how}, or switch "
            f"with `rechunk reindex --policy {wanted}` (rechunk.reindex in Python)"
        )
    return live


def open_live(store: Any, chunker: Chunker, dimension: int) -> Any:
    """The store a sync should write to under ``store.collection`` (created if needed).

    On a store with aliases (Qdrant), a name that does not exist yet becomes an
    alias of a new generation ``<name>__<policy>``, so that a later policy change
    can switch it atomically; an alias whose generation holds another policy is
    refused (that change is a :func:`reindex`). A plain collection, and an alias
    the application made (pointing at a collection not named ``<name>__...``), are
    used as they are.
    """
    aliases = _aliases(store)
    name = store.collection
    if aliases is None:
        _renew_if_empty(store, dimension)
        store.ensure_collection(dimension)
        newer = generations(store)
        if newer:
            warnings.warn(NewerGenerationWarning(name, newer), stacklevel=2)
        return store
    if name in aliases:
        if _replace_if_empty(store, chunker, aliases, dimension):
            return store
        live = check_live_policy(store, chunker, aliases)
        if live is not None and _renew_if_empty(store.with_collection(aliases[name]), dimension):
            store.switch_alias(aliases[name])  # a store may drop a collection's aliases with it
        store.ensure_collection(dimension)
        return store
    if store.collection_info() is not None:
        store.ensure_collection(dimension)
        return store  # a plain collection made by someone else: use it as it is
    generation = store.with_collection(generation_name(name, chunker.policy_id))
    generation.ensure_collection(dimension)
    store.switch_alias(generation.collection)
    return store


class NewerGenerationWarning(UserWarning):
    """A sync writes a collection of a store with no aliases (Chroma) that ``reindex``
    built generations from: an application switched to one of them does not see it."""

    def __init__(self, name: str, newer: list[str]) -> None:
        super().__init__(
            f"collection {name!r} has generations `rechunk reindex` built from it "
            f"({', '.join(repr(n) for n in newer)}); with no aliases here, an application "
            "switched to one does not see this sync: sync that generation "
            f"(--collection {newer[-1]}; in Python a store opened on it), or drop the ones "
            "no one reads"
        )


def _replaceable(store: Any, chunker: Chunker, aliases: dict[str, str], dimension: int) -> bool:
    """Whether the live generation of the alias ``store`` is opened on gives way to a new
    one of ``chunker``'s policy: it is rechunk's, of another policy, holds no point at
    all, is made for vectors of another size than ``dimension``, and no other alias points
    at it. A first sync whose model could not be reached (another model: another size and
    window, so another policy) left it so, and every later sync was refused it for a
    policy nothing was built with. One of the same size is kept, and refused: it may be
    another first sync's, made a moment ago, which would then write its policy's points
    into this one's generation (a sync of another size fails there)."""
    name = store.collection
    current = aliases[name]
    expected = generation_name(name, chunker.policy_id)
    if _live_generation(aliases, name) is None or current == expected:
        return False
    if current.startswith(expected + "__"):
        return False
    if any(alias != name and target == current for alias, target in aliases.items()):
        return False  # an application reads it by another alias
    info = store.with_collection(current).collection_info()
    return info is not None and not info.points and info.dimension not in (0, dimension)


def _replace_if_empty(
    store: Any, chunker: Chunker, aliases: dict[str, str], dimension: int
) -> bool:
    """Point the alias at a new generation of ``chunker``'s policy in place of one that
    gives way (:func:`_replaceable`), which is dropped; True when it did."""
    if not _replaceable(store, chunker, aliases, dimension):
        return False
    name = store.collection
    current, expected = aliases[name], generation_name(name, chunker.policy_id)
    generation = store.with_collection(expected)
    _renew_if_empty(generation, dimension)
    generation.ensure_collection(dimension)
    store.switch_alias(expected)
    store.with_collection(current).drop_collection()
    return True


def _renew_if_empty(generation: Any, dimension: int) -> bool:
    """Make a generation of rechunk's that holds no point at all, and vectors of another
    size, again with ``dimension`` (True when it did): a first sync interrupted after
    making it left it empty, and a sync with a model of another size could never fill it."""
    info = generation.collection_info()
    if info is None or info.points or info.dimension in (0, dimension):
        return False
    generation.drop_collection()
    generation.ensure_collection(dimension)
    return True


@dataclass
class ReindexReport:
    """What :func:`reindex` did: the generation built, the switch, and its sync report.

    ``dropped`` is the previous generation when ``drop_old`` deleted it; ``kept_for``
    names the other aliases that still point at it (it is then kept);
    ``leftovers_dropped`` the older generations of this alias, pointed at by no
    alias, that ``drop_old`` deleted too.
    """

    alias: str
    previous: str | None
    collection: str
    switched: bool
    dropped: str | None
    sync: SyncReport
    kept_for: list[str] = field(default_factory=list)
    leftovers_dropped: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _in_use(store: Any, name: str, aliases: dict[str, str] | None) -> bool:
    """Whether readers may use collection ``name``: an alias points at it or, on a store
    without aliases (Chroma), it holds points (applications open collections by name; an
    empty one is what an interrupted reindex left, which the next one fills)."""
    if aliases is not None:
        return name in aliases.values()
    info = store.with_collection(name).collection_info()
    return info is not None and info.points > 0


def _free_generation(
    store: Any,
    base: str,
    previous: str | None,
    aliases: dict[str, str] | None,
    embedder: Embedder,
) -> str:
    """``base``, else ``base__b``, ``base__c``, ...: the first name that is not the live
    generation, not in use and holds no other model's vectors. A reindex never writes
    into a collection readers use (rebuilding the live policy builds a twin)."""
    for suffix in ("", *(f"__{letter}" for letter in "bcdefghijklmnopqrstuvwxyz")):
        name = base + suffix
        if name == previous or _in_use(store, name, aliases):
            continue
        if not _holds_other_model(store.with_collection(name), embedder):
            return name
    raise StoreError(
        f"every generation name {base}[__b ... __z] is live, in use or holds another model; "
        "drop old generations (reindex --drop-old) first"
    )


def reindex(
    documents: Iterable[Document],
    store: Any,
    chunker: Chunker,
    embedder: Embedder,
    *,
    alias: str | None = None,
    cache: EmbeddingCache | None = None,
    drop_old: bool = False,
    chunker_for: Callable[[Document], Chunker | None] | None = None,
    engine: Callable[..., SyncReport] | None = None,
    progress: Progress | None = None,
) -> ReindexReport:
    """Build a new generation of ``chunker`` for ``documents`` and make it live.

    ``store`` is opened on the alias (Qdrant) or on the live collection (Chroma);
    ``alias`` names another one on the same client instead (a plain collection
    reindexed under a new alias lends the new generation its vectors).
    The documents are the complete set: the new generation holds exactly them.
    It is built in a collection no reader uses: ``<alias>__<policy id>``, or a twin
    of it (``__b``, ``__c`` ...) when that one is live or in use (Chroma: exists).
    The previous generation is kept unless ``drop_old`` is set: then it is deleted
    after the switch unless another alias still points at it, and so is every
    older generation of this alias that no alias points at. Bad input raises
    before anything is created; if building or verifying fails, the live
    generation is untouched and queries never see the partial one.
    ``chunker_for`` picks another chunker per document, as in :func:`~rechunk.sync`;
    the generation is named after ``chunker``'s policy.
    ``engine`` builds the generation in place of :func:`~rechunk.sync` (a callable with
    its signature, such as :func:`rechunk.integrations.ray.engine`: the same sync on a
    Ray cluster); it must raise, as sync does, when the stale check fails.
    ``progress(stage, done, total)`` is called as the generation is built, as in
    :func:`~rechunk.sync`.
    """
    if not callable(getattr(store, "with_collection", None)):
        raise ConfigError(f"{type(store).__name__} cannot open another collection to reindex")
    check_flags(drop_old=drop_old)
    check_parts(
        store, chunker, embedder, cache, chunker_for=chunker_for, engine=engine, progress=progress
    )
    docs, _, _ = check_inputs(documents, store, chunker, embedder, cache)
    if not docs:
        raise InputError("reindex takes the complete set of documents, and got none")
    # a plain collection reindexed under a new alias lends its vectors to the new generation
    origin = store if alias is not None and alias != store.collection else None
    if alias is not None:
        store = store.with_collection(alias)
    alias = store.collection
    aliases = _aliases(store)
    if aliases is None:
        previous = alias if store.collection_info() is not None else None
    else:
        previous = aliases.get(alias)
        if previous is None and store.collection_info() is not None:
            raise CollectionMismatchError(
                f"{alias!r} is a plain Qdrant collection, not an alias, so no generation can "
                "replace it atomically; reindex under a new alias name (alias=...): the new "
                "generation reuses its vectors"
            )
    base = generation_name(alias, chunker.policy_id)
    if _holds_other_model(store.with_collection(base), embedder):
        base = generation_name(alias, chunker.policy_id, embedder.model_id)
    target = _free_generation(store, base, previous, aliases, embedder)
    shadow = store.with_collection(target)
    live = store.with_collection(previous) if previous else None
    # a generation of another model lends nothing (its input keys name that model)
    lenders = [s for s in (live, origin) if s is not None and _lends_to(s, embedder.model_id)]
    shadow.ensure_collection(embedder.dimension)
    # progress only when asked: an engine written before reindex took it may not take it
    asked: dict[str, Any] = {} if progress is None else {"progress": progress}
    report = (engine or sync)(
        docs,
        shadow,
        chunker=chunker,
        embedder=embedder,
        cache=cache,
        prune=True,
        reuse_from=lenders,
        chunker_for=chunker_for,
        **asked,
    )
    held = shadow.doc_ids()
    wanted = {doc.doc_id for doc in docs}
    if report.stale_check != "passed" or held != wanted:
        raise StoreError(
            f"generation {target!r} failed verification ({len(held ^ wanted)} documents "
            f"differ, stale check {report.stale_check}); the live index was not switched"
        )
    result = ReindexReport(alias, previous, target, False, None, report)
    if aliases is None:
        return result  # Chroma: the application switches the collection it opens
    store.switch_alias(target)
    result.switched = True
    if drop_old:
        aliases = store.aliases()
        if live is not None:
            result.kept_for = sorted(a for a, c in aliases.items() if c == previous)
            if not result.kept_for:
                live.drop_collection()
                result.dropped = previous
        for name in generations(store):
            if name != target and name not in aliases.values():
                store.with_collection(name).drop_collection()
                result.leftovers_dropped.append(name)
    return result
