"""What the commands compose: the store of ``--store`` (its collection checked against
``--layout`` and the model), the collections of ``--reuse-from`` that lend vectors, the
embedder of ``--embedder`` / ``--model`` / ``--embed-url``, and the cache of ``--cache``
(shared with the embedder). Stores come from :mod:`rechunk.adapters.uri`, embedders from
:mod:`rechunk.integrations.uri`; each is imported when a command opens one.

Commands call these through the module (``compose.open_embedder(...)``), so that a test
or benchmark can replace one in one place.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from rechunk.cli.options import STATE_DIR, ModelOptions, StoreOptions, make_state_dir
from rechunk.errors import CacheError, ConfigError, StoreError

__all__ = [
    "cache_and_store",
    "check_collection",
    "follow_lender",
    "lenders",
    "open_cache",
    "open_embedder",
    "open_store",
    "policy_kind",
    "read_as_written",
    "share_cache",
    "size_advice",
    "written_in",
]


def open_store(options: StoreOptions, *, create: bool = True, dry_run: bool = False) -> Any:
    """The store of ``--store``; without ``create``, a missing store is a StoreError.

    A dry run plans against an empty in-memory store when nothing is stored yet.
    """
    from rechunk.adapters import uri as stores

    uri = options.store
    if dry_run and not stores.store_exists(uri):
        uri = "qdrant::memory:"
    layout = options.layout or "langchain"
    return stores.open_store(uri, options.collection, layout=layout, create=create)


@contextlib.contextmanager
def lenders(options: StoreOptions, reuse_from: Sequence[str], model_id: str) -> Iterator[list[Any]]:
    """The collections of ``--reuse-from``, each opened read-only on ``--collection`` (in
    the layout it was written in): a sync copies their vectors by input key, so that a
    collection moved to another store embeds nothing again. Closed on the way out."""
    from rechunk.adapters import uri as stores

    opened: list[Any] = []
    lenders: list[Any] = []
    try:
        for uri in reuse_from:
            if uri == options.store:
                raise ConfigError(f"--reuse-from {uri} is the --store itself")
            layout = options.layout or "langchain"
            try:
                source = stores.open_store(uri, options.collection, layout=layout, create=False)
            except StoreError as exc:
                if stores.store_exists(uri):  # there, but failing: the store's error
                    raise
                raise ConfigError(f"--reuse-from {uri}: {exc}") from exc
            opened.append(source)
            lender = source.store
            other = "llamaindex" if layout == "langchain" else "langchain"
            if options.layout is None and written_in(lender, other):
                lender = type(lender)(lender.client, lender.collection, other)
            info = lender.collection_info()
            if info is None or model_id not in info.model_ids:
                held = "nothing" if info is None else ", ".join(sorted(info.model_ids))
                raise ConfigError(
                    f"--reuse-from {uri}: collection {options.collection!r} there holds "
                    f"{held or 'no rechunk points'}, not vectors of {model_id.split(';')[0]}: "
                    "nothing could be reused from it"
                )
            lenders.append(lender)
        yield lenders
    finally:
        for source in opened:
            source.close()


def written_in(store: Any, layout: str) -> bool:
    """Whether ``store``'s collection holds rechunk points in ``layout``."""
    try:
        info = type(store)(store.client, store.collection, layout).collection_info()
    except StoreError:
        return False
    return info is not None and bool(info.model_ids)


def read_as_written(store: Any, layout: str | None, model_id: str | None = None) -> Any:
    """The store to read its collection with: ``store`` itself, checked as
    :func:`check_collection` checks it; or, with no ``--layout`` given (``layout`` None),
    the same collection in the layout it was written in."""
    try:
        check_collection(store, model_id)
        return store
    except ConfigError:
        other = "llamaindex" if store.layout == "langchain" else "langchain"
        if layout is not None or not written_in(store, other):
            raise
    written = type(store)(store.client, store.collection, other)
    check_collection(written, model_id)
    return written


def check_collection(store: Any, model_id: str | None = None) -> None:
    """Refuse a collection written in the other ``--layout``, or (given) by another model.

    Writing it would rewrite its points in the other payload format; reading it
    would find no document, or score mismatched vectors.
    """
    other = "llamaindex" if store.layout == "langchain" else "langchain"
    mismatch = ConfigError(
        f"collection {store.collection!r} was written with --layout {other}, not "
        f"{store.layout}; a collection keeps one layout: pass --layout {other}"
    )
    try:
        info = store.collection_info()
    except StoreError:
        if written_in(store, other):
            raise mismatch from None
        raise
    if info is None:
        return
    if info.points and not info.model_ids and written_in(store, other):
        raise mismatch
    others = sorted(info.model_ids - {model_id}) if model_id is not None else []
    if others:
        theirs, ours = others[0], str(model_id)
        if theirs.split(";")[0] != ours.split(";")[0]:  # the names differ: they suffice
            theirs, ours = theirs.split(";")[0], ours.split(";")[0]
        if theirs.split("@")[0] == ours.split("@")[0] and "@sha256:" in ours:
            theirs, ours = _short_hash(theirs), _short_hash(ours)
            advice = (  # one local folder, by name: its files differ, or their recipe did
                "a local model folder is known by a hash of its weights, configuration and "
                "tokenizer files: it was edited, or synced by an earlier rechunk that hashed "
                "fewer. To rebuild the collection with it: rechunk reindex --policy KIND "
                "--model PATH (KIND as rechunk status shows)"
            )
        else:
            advice = _renamed_server(others[0], str(model_id)) or (
                "pass the --model or --embedder it was synced with, with the same options "
                "(dimension=, ...) (rechunk reindex --model changes it)"
            )
        if model_id in info.model_ids:  # written by both: a query could use neither alone
            names = ", ".join(sorted(m.split(";")[0] for m in info.model_ids))
            raise ConfigError(
                f"collection {store.collection!r} holds points of {len(info.model_ids)} "
                f"models ({names}), whose vectors cannot be compared: rebuild it with one "
                "(rechunk reindex --policy KIND --model PATH, KIND as rechunk status shows)"
            )
        raise ConfigError(
            f"collection {store.collection!r} was written by {theirs}, not {ours}; {advice}"
        )


#: how to rebuild a collection under a new openai: identity
_REBUILD_OPENAI = (
    "rechunk reindex --policy KIND --embedder 'openai:...' --embed-url URL (KIND as rechunk "
    "status shows) embeds it again under the new one"
)


def _renamed_server(theirs: str, ours: str) -> str | None:
    """What to do when an earlier rechunk named this openai: server otherwise than now
    (docs/upgrading.md): it left the base URL's path out, or made ``identity=`` the whole
    identity; None for any other pair."""
    prefix = "openai/v1:"
    if not ours.startswith(prefix):
        return None
    head, _, size = ours[len(prefix) :].rpartition(";dim=")
    if theirs.startswith(prefix):
        # an earlier identity's server is a bare host (a model name may hold an @, as
        # Cloudflare's @cf/... do, and now a path may too)
        their_head, _, their_size = theirs[len(prefix) :].rpartition(";dim=")
        model, _, their_server = their_head.rpartition("@")
        if their_size != size or not head.startswith(their_head + "/"):
            return None
        return (
            "an earlier rechunk left the base URL's path out of a server's identity; if "
            f"this path's model wrote the collection and nothing else on {their_server} "
            f"shared its cache, keep it with identity={their_server} (openai:{model}?"
            f"identity={their_server}&...), else {_REBUILD_OPENAI}"
        )
    if head.endswith("@" + theirs):  # a bare name: what identity= made the whole identity
        return (
            f"an earlier rechunk made identity={theirs} the whole identity (it now names the "
            f"server, beside the model and dimension): {_REBUILD_OPENAI}"
        )
    return None


def _short_hash(model_id: str) -> str:
    """``model_id`` with its sha256 cut to 12 hex digits, enough to tell two apart."""
    return re.sub(r"(sha256:[0-9a-f]{12})[0-9a-f]+", r"\1", model_id)


def policy_kind(policy: str | None, store: Any, lenders: Sequence[Any] = ()) -> str:
    """``--policy``, else the kind of policy the collection's live generation was built
    with (a ``rechunk reindex --policy cdc`` left it on cdc: later syncs keep to it; on
    Chroma, the generation the collection's name names), else,
    for a collection not made yet, that of the first ``--reuse-from`` collection (a move
    keeps its chunks, so it embeds nothing), else the default."""
    from rechunk.chunking.policy import DEFAULT_POLICY, POLICIES
    from rechunk.sync.generations import live_policy_kind

    if policy is not None:
        return policy
    live = live_policy_kind(store) or _named_kind(store.collection)
    if live in POLICIES:
        return live
    if lenders and store.collection_info() is None:
        kind = live_policy_kind(lenders[0]) or _stored_policy_kind(lenders[0])
        if kind in POLICIES:
            return kind
    return DEFAULT_POLICY


def _named_kind(collection: str) -> str | None:
    """The kind of policy a generation's name says it was built with
    (``rechunk__fixed-3e9342360fb2``: fixed): a Chroma generation, which no alias names,
    is synced by its name, and a sync of it without --policy took the default."""
    _, sep, generation = collection.partition("__")
    return generation.split("-")[0] if sep else None


def _stored_policy_kind(store: Any) -> str | None:
    """The kind of policy of the first document of ``store`` chunked by one of the
    policies ``--policy`` names (a code file's policy is picked by its language)."""
    from rechunk.chunking.policy import POLICIES

    doc_ids = sorted(store.doc_ids())
    for start in range(0, len(doc_ids), 64):
        for points in store.get_points_many(doc_ids[start : start + 64]).values():
            kinds: set[str] = {p.payload.policy.split("-")[0] for p in points} & set(POLICIES)
            if kinds:
                return kinds.pop()
    return None


def follow_lender(store: Any, lenders: Sequence[Any], layout: str | None) -> Any:
    """``store``, in the layout of the first ``--reuse-from`` collection when its own
    collection is not made yet and ``--layout`` was not given: a LlamaIndex collection
    moved to another store stays readable by LlamaIndex."""
    if not lenders or layout is not None or lenders[0].layout == store.layout:
        return store
    if store.collection_info() is not None:
        return store
    return type(store)(store.client, store.collection, lenders[0].layout)


def open_embedder(options: ModelOptions) -> Any:
    """The embedder of ``--embedder`` / ``--model`` / ``--embed-url`` (see
    :mod:`rechunk.integrations.uri`); nothing is loaded until something is embedded."""
    from rechunk.integrations import uri as embedders

    return embedders.open_embedder(
        options.embedder, model=options.model, embed_url=options.embed_url
    )


def share_cache(embedder: Any, cache: Any) -> None:
    from rechunk.integrations import uri as embedders

    embedders.share_cache(embedder, cache)


def size_advice(store: Any, points: int | None = None) -> str | None:
    """The store's advice on its size (embedded Qdrant: a server past 100,000 points)."""
    advise = getattr(store, "size_advice", None)
    return advise(points) if callable(advise) else None


def open_cache(path: str, *, dry_run: bool = False) -> Any:
    """The SQLite cache of ``--cache`` (a dry run only reads one that exists)."""
    from rechunk.reuse.cache import SQLiteCache

    try:
        if dry_run:
            return SQLiteCache(path, readonly=True) if Path(path).exists() else None
        return SQLiteCache(path)
    except CacheError as exc:
        raise ConfigError(f"--cache {path}: {exc}") from exc


@contextlib.contextmanager
def cache_and_store(
    options: StoreOptions, cache_path: str, *, dry_run: bool = False, model_id: str | None = None
) -> Iterator[tuple[Any, Any]]:
    """The cache at ``cache_path`` and the store of ``options`` (collection checked: its
    layout, and given ``model_id`` its model; without ``--layout``, in the layout the
    collection was written in, as ``--policy`` follows its policy), both closed on the
    way out.

    The cache opens first, so that a bad ``--cache`` creates nothing in the store. If
    the store then fails to open, or its collection is refused, the cache file (and
    folder) this call created is removed again: a failed first run leaves no state.
    """
    from rechunk.reuse.cache import MemoryCache

    path = Path(cache_path)
    created = [p for p in (path.parent, path) if not p.exists()]
    on_disk = True
    if not dry_run and path.parent.absolute() == STATE_DIR.absolute():
        # the working folder, its owner's only (it holds the store's text); where it cannot
        # be made (a read-only checkout) the cache is kept in memory, with a warning
        on_disk = make_state_dir(keeps=f"cache {cache_path}")
    cache = open_cache(cache_path, dry_run=dry_run) if on_disk else MemoryCache()
    try:
        opened = open_store(options, create=not dry_run, dry_run=dry_run)
        try:
            opened.store = read_as_written(opened.store, options.layout, model_id)
        except BaseException:
            opened.close()
            raise
    except BaseException:
        if cache is not None:
            cache.close()
        for made in reversed(created):
            with contextlib.suppress(OSError):
                if made.is_dir():
                    made.rmdir()  # only when empty
                else:
                    for suffix in ("", "-wal", "-shm", "-journal"):
                        Path(f"{made}{suffix}").unlink(missing_ok=True)
        raise
    try:
        yield cache, opened
    finally:
        opened.close()
        if cache is not None:
            cache.close()
