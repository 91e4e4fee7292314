"""The contract every rechunk VectorStore adapter must pass, in both payload layouts.

Subclass :class:`StoreContract` and provide the ``make_store`` fixture: a factory
``make_store(layout, *, collection=None, batch_size=None) -> VectorStore`` that
returns a store on a collection that does not exist yet (a fresh name each
call unless ``collection`` is given), over a client the fixture owns::

    class TestMyStore(StoreContract):
        nested_metadata = True

        @pytest.fixture
        def make_store(self) -> Iterator[StoreFactory]:
            ...
"""

from __future__ import annotations

import datetime
import math
import uuid
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, ClassVar, Protocol

import numpy as np
import numpy.typing as npt
import pytest

from rechunk.errors import ConfigError, InputError, StoreError, StoreUnavailableError
from rechunk.sync.store import (
    RESERVED_METADATA_KEYS,
    CollectionInfo,
    PointPayload,
    PointWrite,
    StoredPoint,
    VectorStore,
    mark_superseded,
)

LAYOUTS = ("langchain", "llamaindex")
DISTANCES = ("cosine", "dot", "euclid")
DIM = 4
MODEL = "test/model@1"
TEXT = "  Ünïcødé text\twith 中文, emoji 😀 and\nnew lines  "


class StoreFactory(Protocol):
    def __call__(
        self, layout: str, *, collection: str | None = None, batch_size: int | None = None
    ) -> Any: ...


def new_id() -> str:
    return str(uuid.uuid4())


#: rechunk's own payload fields, which the llamaindex layout hides from embedding and the LLM
RECHUNK_KEYS = {
    "doc_id", "revision", "policy", "input_key", "model_id", "ordinal", "start", "end", "tokens",
}  # fmt: skip


def store_factory(store_class: Any, client: Any) -> StoreFactory:
    """``make_store`` for an adapter class over one client: a fresh collection per call."""

    def make(layout: str, *, collection: str | None = None, batch_size: int | None = None) -> Any:
        options: dict[str, Any] = {} if batch_size is None else {"batch_size": batch_size}
        return store_class(client, collection or collection_name(), layout, **options)

    return make


def collection_name() -> str:
    """A fresh collection name valid for Qdrant and Chroma (3-63 chars, [a-z0-9-])."""
    return f"rc-{uuid.uuid4().hex[:16]}"


def unit(i: int, dim: int = DIM) -> npt.NDArray[np.float32]:
    """A deterministic unit vector, different for every i."""
    rng = np.random.default_rng(1000 + i)
    v = rng.normal(size=dim)
    out: npt.NDArray[np.float32] = (v / np.linalg.norm(v)).astype(np.float32)
    return out


def payload(i: int, doc_id: str = "a.md", **changes: Any) -> PointPayload:
    fields: dict[str, Any] = {
        "doc_id": doc_id,
        "revision": "rev-1",
        "policy": "cdc:176-352",
        "input_key": f"key-{doc_id}-{i}",
        "model_id": MODEL,
        "ordinal": i,
        "start": 10 * i,
        "end": 10 * i + 10,
        "tokens": 3 + i,
        "text": f"chunk {i} of {doc_id}",
        "metadata": {"source": doc_id, "n": i},
    }
    fields.update(changes)
    return PointPayload(**fields)


def fill(store: Any, metadata: dict[str, Any]) -> list[tuple[str, PointPayload]]:
    """Create the collection and write three points (two of a.md, one of b.md)."""
    store.ensure_collection(DIM)
    written = [
        (new_id(), payload(0, text=TEXT, metadata=metadata)),
        (new_id(), payload(1, version=2)),
        (new_id(), payload(0, doc_id="b.md")),
    ]
    store.write([PointWrite(i, p, unit(n)) for n, (i, p) in enumerate(written)])
    return written


class NoIO:
    """A client that fails any use: for checking that a constructor does no I/O."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the constructor touched the client: {name}")


def fixed_embeddings(vectors: dict[str, Sequence[float]], dim: int = DIM) -> Any:
    """A small real LangChain ``Embeddings``: known texts get their vector, others a fixed one."""
    from langchain_core.embeddings import Embeddings

    class FixedEmbeddings(Embeddings):
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return [self.embed_query(t) for t in texts]

        def embed_query(self, text: str) -> list[float]:
            if text in vectors:
                return [float(x) for x in vectors[text]]
            return [1.0] + [0.0] * (dim - 1)

    return FixedEmbeddings()


class StoreContract:
    """Behaviour shared by every store adapter; runs once per layout."""

    #: whether the store holds None, list and dict metadata values (Chroma: no -> StoreError)
    nested_metadata: ClassVar[bool] = True

    @pytest.fixture
    def make_store(self) -> StoreFactory:
        raise NotImplementedError("subclasses provide the make_store fixture")

    @pytest.fixture(params=LAYOUTS)
    def layout(self, request: pytest.FixtureRequest) -> str:
        value: str = request.param
        return value

    @pytest.fixture
    def store(self, make_store: StoreFactory, layout: str) -> VectorStore:
        store: VectorStore = make_store(layout)
        return store

    @pytest.fixture
    def ready(self, store: VectorStore) -> VectorStore:
        store.ensure_collection(DIM)
        return store

    # -- construction and collection -------------------------------------------------------

    def test_is_a_vector_store(self, store: VectorStore) -> None:
        assert isinstance(store, VectorStore)
        assert isinstance(store.collection, str) and store.collection

    def test_unknown_layout_is_a_config_error(self, make_store: StoreFactory) -> None:
        with pytest.raises(ConfigError, match="layout"):
            make_store("haystack")

    def test_collection_info_of_missing_collection_is_none(self, store: VectorStore) -> None:
        assert store.collection_info() is None

    def test_ensure_collection_creates_then_validates(self, store: VectorStore) -> None:
        info = store.ensure_collection(DIM)
        assert info == CollectionInfo(store.collection, DIM, "cosine", 0, frozenset())
        assert store.ensure_collection(DIM, "cosine") == info
        assert store.collection_info() == info
        assert store.collection in store.collections()  # type: ignore[attr-defined]

    @pytest.mark.parametrize("distance", DISTANCES)
    def test_ensure_collection_with_each_distance(self, store: VectorStore, distance: Any) -> None:
        info = store.ensure_collection(DIM, distance)
        assert (info.dimension, info.distance) == (DIM, distance)
        assert store.ensure_collection(DIM, distance).distance == distance

    def test_other_dimension_or_distance_is_refused(self, ready: VectorStore) -> None:
        ready.write([PointWrite(new_id(), payload(0), unit(0))])
        before = ready.collection_info()
        with pytest.raises(StoreError) as exc:
            ready.ensure_collection(DIM + 4)
        assert str(DIM) in str(exc.value) and str(DIM + 4) in str(exc.value)
        assert not isinstance(exc.value, StoreUnavailableError)
        with pytest.raises(StoreError) as exc:
            ready.ensure_collection(DIM, "dot")
        assert "cosine" in str(exc.value) and "dot" in str(exc.value)
        assert ready.collection_info() == before
        assert before is not None and before.points == 1 and before.model_ids == {MODEL}

    @pytest.mark.parametrize(
        "args", [(0,), (-3,), (True,), (4.0,), ("4",), (4, "manhattan"), (4, "COSINE")]
    )
    def test_bad_collection_arguments(self, store: VectorStore, args: tuple[Any, ...]) -> None:
        with pytest.raises(ConfigError):
            store.ensure_collection(*args)
        assert store.collection_info() is None

    def test_missing_collection_is_a_store_error(self, store: VectorStore) -> None:
        calls: list[Callable[[], object]] = [
            lambda: store.get_points("a.md"),
            lambda: store.get_points_many(["a.md"]),
            lambda: store.write([PointWrite(new_id(), payload(0), unit(0))]),
            lambda: store.write([PointWrite(new_id(), payload(0), None)]),
            lambda: store.get_vectors(["key"], MODEL),
            lambda: store.delete([new_id()]),
            lambda: store.doc_ids(),
            lambda: store.search(unit(0)),
        ]
        for call in calls:
            with pytest.raises(StoreError, match="ensure_collection") as exc:
                call()
            assert not isinstance(exc.value, StoreUnavailableError)
        assert store.collection_info() is None

    def test_empty_writes_do_nothing(self, store: VectorStore) -> None:
        store.write([])
        store.delete([])
        assert store.get_vectors([], MODEL) == {}
        assert store.collection_info() is None

    # -- write and read back ---------------------------------------------------------------

    def test_write_then_get_points_round_trip(self, ready: VectorStore) -> None:
        a = [
            (new_id(), payload(0, text=TEXT, version=None)),
            (new_id(), payload(1, version=7, metadata={})),
            (
                new_id(),
                payload(
                    2,
                    version=0,
                    metadata={"title": "Ünï 中文", "score": 0.25, "flag": False, "big": 2**53 + 1,
                              "empty": ""},
                ),
            ),
        ]  # fmt: skip
        b = [(new_id(), payload(0, doc_id="b.md"))]
        ready.write([PointWrite(i, p, unit(n)) for n, (i, p) in enumerate(reversed(a + b))])
        got = ready.get_points("a.md")
        assert got == [StoredPoint(i, p) for i, p in a]
        assert got[0].payload.text == TEXT
        assert got[1].payload.version == 7 and got[0].payload.version is None
        assert all(type(p.payload.metadata) is dict for p in got)
        assert ready.get_points("b.md") == [StoredPoint(i, p) for i, p in b]
        assert ready.get_points("nothing.md") == []
        assert ready.get_points_many(["nothing.md", "b.md", "a.md", "b.md"]) == {
            "nothing.md": [],
            "b.md": ready.get_points("b.md"),
            "a.md": got,
        }
        assert ready.get_points_many([]) == {}
        for bad in ("a.md", ["a.md", ""], [None]):
            with pytest.raises(ConfigError):
                ready.get_points_many(bad)  # type: ignore[arg-type]
        info = ready.collection_info()
        assert info is not None and info.points == 4 and info.model_ids == {MODEL}

    def test_reads_page_through_small_batches(self, make_store: StoreFactory, layout: str) -> None:
        store = make_store(layout, batch_size=3)
        store.ensure_collection(DIM)
        written = [(new_id(), payload(i)) for i in range(10)]
        written += [(new_id(), payload(i, doc_id=f"d{i}.md")) for i in range(7)]
        store.write([PointWrite(i, p, unit(n)) for n, (i, p) in enumerate(written)])
        assert store.get_points("a.md") == [StoredPoint(i, p) for i, p in written[:10]]
        many = store.get_points_many([f"d{i}.md" for i in range(7)] + ["a.md"])
        assert many["a.md"] == store.get_points("a.md")  # ids span several requests
        assert [many[f"d{i}.md"] for i in range(7)] == [[StoredPoint(i, p)] for i, p in written[10:]]
        assert store.doc_ids() == {"a.md"} | {f"d{i}.md" for i in range(7)}
        keys = [p.input_key for _, p in written]
        assert set(store.get_vectors(keys, MODEL)) == set(keys)
        # few keys for the collection's size (keyed reads), and many (one pass over it)
        more = [(new_id(), payload(i, doc_id="e.md", text=f"text {i}")) for i in range(60)]
        store.write([PointWrite(i, p, unit(n)) for n, (i, p) in enumerate(more)])
        keys = [p.input_key for _, p in more]
        for asked in (keys[:1], keys[:40]):
            got = store.get_vectors([*asked, "no-such-key"], MODEL)
            assert set(got) == set(asked) and {v.shape for v in got.values()} == {(DIM,)}
            assert store.get_vectors(asked, "another-model") == {}
        store.delete([i for i, _ in written[:8]])
        assert [p.id for p in store.get_points("a.md")] == [i for i, _ in written[8:10]]

    def test_upsert_replaces_a_point(self, ready: VectorStore) -> None:
        point_id = new_id()
        ready.write([PointWrite(point_id, payload(0), unit(0))])
        ready.write([PointWrite(point_id, payload(0, revision="rev-2", metadata={}), unit(1))])
        assert ready.get_points("a.md") == [
            StoredPoint(point_id, payload(0, revision="rev-2", metadata={}))
        ]
        vectors = ready.get_vectors([payload(0).input_key], MODEL)
        np.testing.assert_allclose(vectors[payload(0).input_key], unit(1), rtol=1e-6, atol=1e-6)

    def test_one_write_adds_new_points_and_replaces_stored_ones(self, ready: VectorStore) -> None:
        stored, new = new_id(), new_id()
        ready.write([PointWrite(stored, payload(0), unit(0))])
        ready.write([
            PointWrite(new, payload(1), unit(2)),
            PointWrite(stored, payload(0, revision="rev-2"), unit(1)),
        ])  # fmt: skip
        assert ready.get_points("a.md") == [
            StoredPoint(stored, payload(0, revision="rev-2")), StoredPoint(new, payload(1))
        ]  # fmt: skip
        vectors = ready.get_vectors([payload(0).input_key, payload(1).input_key], MODEL)
        np.testing.assert_allclose(vectors[payload(0).input_key], unit(1), rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(vectors[payload(1).input_key], unit(2), rtol=1e-6, atol=1e-6)

    def test_payload_only_update_keeps_the_vector(self, ready: VectorStore) -> None:
        ids = [new_id(), new_id()]
        old = [payload(0, metadata={"keep": 1, "drop": "x"}), payload(1)]
        ready.write([PointWrite(ids[n], p, unit(n)) for n, p in enumerate(old)])
        keys = [p.input_key for p in old]
        before = ready.get_vectors(keys, MODEL)
        new = [
            payload(0, revision="rev-2", ordinal=5, start=120, end=130, version=3,
                    metadata={"keep": 2, "added": True}),
            payload(1, revision="rev-2", ordinal=4, start=100, end=110, text=" changed  text "),
        ]  # fmt: skip
        ready.write([PointWrite(ids[n], p, None) for n, p in enumerate(new)])
        assert ready.get_points("a.md") == [
            StoredPoint(ids[1], new[1]),
            StoredPoint(ids[0], new[0]),
        ]
        after = ready.get_vectors(keys, MODEL)
        for key in keys:
            assert after[key].dtype == np.float32
            assert after[key].tobytes() == before[key].tobytes()
        hits = ready.search(unit(1), k=1)
        assert hits[0][0] == StoredPoint(ids[1], new[1])

    def test_neighbours_round_trip_where_the_layout_keeps_them(
        self, ready: VectorStore, layout: str
    ) -> None:
        ids = [new_id() for _ in range(3)]
        chain = [
            payload(n, previous_id=ids[n - 1] if n else None,
                    next_id=ids[n + 1] if n < 2 else None)
            for n in range(3)
        ]  # fmt: skip
        ready.write([PointWrite(ids[n], p, unit(n)) for n, p in enumerate(chain)])
        keeps = getattr(ready, "keeps_neighbours", False)
        assert keeps == (layout == "llamaindex")
        got = [p.payload for p in ready.get_points("a.md")]
        if keeps:
            assert got == chain
            # a payload-only update moves a neighbour (an insert after the first chunk)
            moved = replace(chain[0], next_id=new_id())
            ready.write([PointWrite(ids[0], moved, None)])
            assert ready.get_points("a.md")[0].payload == moved
        else:  # the langchain layout has no place for them
            assert got == [replace(p, previous_id=None, next_id=None) for p in chain]

    def test_payload_update_of_a_missing_point_writes_nothing(self, ready: VectorStore) -> None:
        with pytest.raises(StoreError, match="missing") as exc:
            ready.write(
                [PointWrite(new_id(), payload(0), unit(0)), PointWrite(new_id(), payload(1))]
            )
        assert not isinstance(exc.value, StoreUnavailableError)
        info = ready.collection_info()
        assert info is not None and info.points == 0

    # -- vectors, delete, doc ids, search --------------------------------------------------

    def test_get_vectors_by_key_and_model(self, ready: VectorStore) -> None:
        shared = payload(0).input_key
        ready.write(
            [
                PointWrite(new_id(), payload(0), unit(0)),
                PointWrite(new_id(), payload(5, doc_id="b.md", input_key=shared), unit(0)),
                PointWrite(new_id(), payload(1), unit(1)),
                PointWrite(new_id(), payload(2, model_id="other/model"), unit(2)),
            ]
        )
        keys = [shared, payload(1).input_key, payload(2).input_key, "absent"]
        got = ready.get_vectors(keys, MODEL)
        assert set(got) == {shared, payload(1).input_key}
        for key, i in ((shared, 0), (payload(1).input_key, 1)):
            assert got[key].dtype == np.float32 and got[key].shape == (DIM,)
            np.testing.assert_allclose(got[key], unit(i), rtol=1e-6, atol=1e-6)
        other = ready.get_vectors(keys, "other/model")
        assert set(other) == {payload(2).input_key}
        assert ready.get_vectors(["absent"], MODEL) == {}
        with pytest.raises(ConfigError):
            ready.get_vectors("a-single-str", MODEL)

    def test_get_vectors_at_reads_only_points_that_hold_the_input_of_the_model(
        self, ready: VectorStore
    ) -> None:
        """A store that reads by point id (``get_vectors_at``: a sync reads there what it
        published itself) returns one vector per input whose point holds that input of
        that model; the others are left out."""
        read_at = getattr(ready, "get_vectors_at", None)
        if read_at is None:
            pytest.skip("the store reads vectors by input key only")
        (a0, pa0), (a1, pa1), (b0, pb0) = [
            (new_id(), payload(0)), (new_id(), payload(1)), (new_id(), payload(0, doc_id="b.md"))
        ]  # fmt: skip
        ready.write([PointWrite(a0, pa0, unit(0)), PointWrite(a1, pa1, unit(1)),
                     PointWrite(b0, pb0, unit(2))])  # fmt: skip
        found = read_at({pa0.input_key: a0, pb0.input_key: b0}, MODEL)
        assert set(found) == {pa0.input_key, pb0.input_key}
        assert found[pb0.input_key].dtype == np.float32
        np.testing.assert_allclose(found[pb0.input_key], unit(2), rtol=1e-6, atol=1e-6)
        # a point that holds another input, one that is gone, another model: left out
        assert read_at({pa0.input_key: a1, pa1.input_key: new_id()}, MODEL) == {}
        assert read_at({pa0.input_key: a0}, "another-model") == {}
        assert read_at({}, MODEL) == {}
        for points, model in (({pa0.input_key: a0}, ""), ({pa0.input_key: a0.upper()}, MODEL)):
            with pytest.raises(ConfigError):
                read_at(points, model)

    def test_delete_ignores_missing_ids(self, ready: VectorStore) -> None:
        ids = [new_id() for _ in range(3)]
        ready.write([PointWrite(i, payload(n), unit(n)) for n, i in enumerate(ids)])
        ready.delete([ids[0], new_id(), ids[0]])
        assert [p.id for p in ready.get_points("a.md")] == ids[1:]
        ready.delete([])
        ready.delete(ids)
        assert ready.get_points("a.md") == []
        with pytest.raises(ConfigError):
            ready.delete(["not-a-uuid"])

    def test_doc_ids(self, ready: VectorStore) -> None:
        assert ready.doc_ids() == set()
        b_ids = [new_id(), new_id()]
        ready.write(
            [
                PointWrite(new_id(), payload(0), unit(0)),
                PointWrite(b_ids[0], payload(0, doc_id="b.md"), unit(1)),
                PointWrite(b_ids[1], payload(1, doc_id="b.md"), unit(2)),
            ]
        )
        assert ready.doc_ids() == {"a.md", "b.md"}
        ready.delete(b_ids)
        assert ready.doc_ids() == {"a.md"}

    #: how many of another tool's points :meth:`add_foreign` writes before rechunk's: more
    #: than the stores' model sample (256 points)
    FOREIGN = 300

    def add_foreign(self, store: Any, count: int) -> None:
        """Write ``count`` points another tool wrote (its own ids and payloads, none of
        rechunk's fields) into ``store``'s collection with the store's own client."""
        raise NotImplementedError("subclasses write another tool's points")

    def test_other_tools_points_hide_neither_the_model_nor_the_documents(
        self, ready: VectorStore
    ) -> None:
        """A collection another tool filled first (a LangChain index rechunk now syncs
        into): the model a sync checks its own against is still the one that wrote
        rechunk's points, however many of the other tool's come first."""
        self.add_foreign(ready, self.FOREIGN)
        fill(ready, {"source": "a.md"})
        info = ready.collection_info()
        assert info is not None and info.points == self.FOREIGN + 3
        assert info.model_ids == {MODEL}
        assert ready.doc_ids() == {"a.md", "b.md"}

    def test_other_model_looks_at_every_point(self, ready: VectorStore) -> None:
        """A store that offers ``other_model`` (the check after a first sync that no other
        model's sync wrote meanwhile) names a model that wrote any one of rechunk's points,
        however many points come before it; another tool's points and the asking model's
        own are none."""
        other_model = getattr(ready, "other_model", None)
        if other_model is None:
            pytest.skip("the store holds a writer lock for a sync: no other model writes")
        assert other_model(MODEL) is None
        self.add_foreign(ready, self.FOREIGN)
        ready.write([PointWrite(new_id(), payload(i, doc_id=f"d{i}.md"), unit(i % DIM))
                     for i in range(self.FOREIGN)])  # fmt: skip
        assert other_model(MODEL) is None
        late = payload(0, doc_id="late.md", model_id="test/another@2")
        ready.write([PointWrite(new_id(), late, unit(1))])
        assert other_model(MODEL) == "test/another@2"
        assert other_model("test/another@2") == MODEL

    @pytest.mark.parametrize("distance", DISTANCES)
    def test_search_returns_the_nearest_first(self, store: VectorStore, distance: Any) -> None:
        store.ensure_collection(DIM, distance)
        ids = [new_id() for _ in range(DIM)]
        basis = np.eye(DIM, dtype=np.float32)
        store.write([PointWrite(ids[i], payload(i), basis[i]) for i in range(DIM)])
        query = np.array([1.0, 0.5, 0.1, 0.0], dtype=np.float32)
        hits = store.search(query, k=3)
        assert [p.id for p, _ in hits] == ids[:3]
        assert hits[0][0] == StoredPoint(ids[0], payload(0))
        scores = [s for _, s in hits]
        assert scores == sorted(scores, reverse=True) and len(set(scores)) == 3
        expected = {
            "cosine": 1.0 / float(np.linalg.norm(query)),
            "dot": 1.0,
            "euclid": -math.sqrt(0.26),
        }[distance]
        assert scores[0] == pytest.approx(expected, abs=1e-5)
        assert len(store.search(query, k=10)) == DIM
        bad_ks: list[Any] = [0, -1, True, 2.0]
        for bad in bad_ks:
            with pytest.raises(ConfigError):
                store.search(query, k=bad)
        with pytest.raises(StoreError):
            store.search(np.ones(DIM + 1, dtype=np.float32))

    @pytest.mark.parametrize("distance", DISTANCES)
    def test_search_many_answers_as_search_does(self, store: VectorStore, distance: Any) -> None:
        """A store that searches many vectors at once (``search_many``: the watcher's
        retrievability probe) gives, for each, what ``search`` gives: the same points in
        the same order with the same scores, superseded and deleted points left out."""
        many = getattr(store, "search_many", None)
        if many is None:
            pytest.skip("the store searches one vector at a time")
        store.ensure_collection(DIM, distance)
        rng = np.random.default_rng(5)
        writes = [
            PointWrite(new_id(), payload(i, doc_id=f"d{i % 3}.md"), rng.normal(size=DIM).astype(np.float32))
            for i in range(24)
        ]  # fmt: skip
        store.write(writes)
        mark_superseded(store, [StoredPoint(w.id, w.payload) for w in writes[:6]])
        store.delete([w.id for w in writes[6:8]])
        queries = [w.vector for w in writes[:10] if w.vector is not None]
        queries += [rng.normal(size=DIM).astype(np.float32) for _ in range(4)]
        for k in (1, 3, 30):
            got = many(queries, k)
            want = [store.search(q, k) for q in queries]
            assert [[p for p, _ in hits] for hits in got] == [[p for p, _ in h] for h in want]
            for hits, expected in zip(got, want):
                assert [s for _, s in hits] == pytest.approx([s for _, s in expected], abs=1e-5)
            gone = {w.id for w in writes[:8]}
            assert not any(p.id in gone for hits in got for p, _ in hits)
        assert many([], 3) == []
        with pytest.raises(ConfigError):
            many(queries, 0)
        with pytest.raises(StoreError):
            many([np.ones(DIM + 1, dtype=np.float32)], 3)

    # -- the revision guard (issue #40) ----------------------------------------------------

    def test_superseded_points_are_marked_payload_only_and_searches_leave_them_out(
        self, ready: VectorStore
    ) -> None:
        ids = [new_id() for _ in range(DIM)]
        basis = np.eye(DIM, dtype=np.float32)
        written = [payload(i, version=1) for i in range(DIM)]
        ready.write([PointWrite(ids[i], written[i], basis[i]) for i in range(DIM)])
        keys = [p.input_key for p in written]
        before = ready.get_vectors(keys, MODEL)
        query = np.array([1.0, 0.5, 0.1, 0.0], dtype=np.float32)
        assert [p.id for p, _ in ready.search(query, k=2)] == ids[:2]

        supersede = getattr(ready, "supersede", None)
        if supersede is not None:  # the store's own payload-only request; missing ids ignored
            supersede([ids[0], new_id()])
        else:
            mark_superseded(ready, [StoredPoint(ids[0], written[0])])

        class WithoutSupersede:  # the fallback: each point's whole payload written again
            def __getattr__(self, name: str) -> Any:
                if name == "supersede":
                    raise AttributeError(name)
                return getattr(ready, name)

        mark_superseded(WithoutSupersede(), [StoredPoint(ids[1], written[1])])  # type: ignore[arg-type]
        stored = {p.id: p.payload for p in ready.get_points("a.md")}
        assert stored == {
            ids[0]: replace(written[0], superseded=True),
            ids[1]: replace(written[1], superseded=True),
            ids[2]: written[2],
            ids[3]: written[3],
        }
        after = ready.get_vectors(keys, MODEL)
        assert all(after[key].tobytes() == before[key].tobytes() for key in keys)
        # the two nearest are marked: the search still returns k, the next ones
        assert [p.id for p, _ in ready.search(query, k=2)] == ids[2:]
        assert [p.id for p, _ in ready.search(query, k=10)] == ids[2:]
        # a superseded point written again (its revision is current again) is found again
        ready.write([PointWrite(ids[0], written[0], None)])
        assert ready.get_points("a.md")[0] == StoredPoint(ids[0], written[0])
        assert [p.id for p, _ in ready.search(query, k=2)] == [ids[0], ids[2]]
        if supersede is not None and getattr(ready, "conditional_versions", False):
            supersede([ids[2]], version=0)  # a point of a newer version is left alone
            assert [p.id for p, _ in ready.search(query, k=2)] == [ids[0], ids[2]]

    # -- bad input changes nothing ---------------------------------------------------------

    @pytest.mark.parametrize("key", sorted(RESERVED_METADATA_KEYS))
    def test_reserved_metadata_key_is_refused(self, ready: VectorStore, key: str) -> None:
        bad = payload(1, metadata={"fine": 1, key: "x"})
        with pytest.raises(ConfigError, match=key):
            ready.write(
                [PointWrite(new_id(), payload(0), unit(0)), PointWrite(new_id(), bad, unit(1))]
            )
        info = ready.collection_info()
        assert info is not None and info.points == 0

    @pytest.mark.parametrize("key", ["_node_content", "_node_type", "document_id", "ref_doc_id"])
    def test_llamaindex_keys_are_reserved_in_that_layout(
        self, ready: VectorStore, layout: str, key: str
    ) -> None:
        point = PointWrite(new_id(), payload(0, metadata={key: "mine"}), unit(0))
        if layout == "llamaindex":
            with pytest.raises(InputError, match=f"document 'a.md': metadata '{key}'"):
                ready.check_metadata("a.md", {key: "mine"})  # what a sync asks first
            with pytest.raises(ConfigError, match=key):
                ready.write([point])
            assert ready.get_points("a.md") == []
        else:
            ready.check_metadata("a.md", {key: "mine"})
            ready.write([point])
            assert ready.get_points("a.md") == [StoredPoint(point.id, point.payload)]

    @pytest.mark.parametrize(
        "value",
        [
            datetime.date(2024, 1, 1),
            {1, 2},
            b"bytes",
            (1, 2),
            math.nan,
            math.inf,
            np.float32(1.0),
            object(),
            2**70,
            {"nested": {1: "int key"}},
            ["ok", datetime.datetime(2024, 1, 1)],
        ],
        ids=lambda v: type(v).__name__,
    )
    def test_non_json_metadata_is_refused(self, ready: VectorStore, value: object) -> None:
        bad = payload(1, metadata={"value": value})
        with pytest.raises(InputError, match="value"):
            ready.check_metadata("a.md", {"value": value})
        with pytest.raises(ConfigError, match="value"):
            ready.write(
                [PointWrite(new_id(), payload(0), unit(0)), PointWrite(new_id(), bad, unit(1))]
            )
        info = ready.collection_info()
        assert info is not None and info.points == 0

    @pytest.mark.parametrize(
        ("value", "flat_ok"),
        [
            (None, False),
            (["a", "b"], True),
            ([1, 2], True),
            ([True, False], True),
            ([1, True], False),
            ([], False),
            ([1, 2.5, True, None], False),
            ({"name": "x", "tags": ["y"], "deep": {"z": 1}}, False),
        ],
        ids=["none", "str-list", "int-list", "bool-list", "int-bool", "empty", "mixed", "dict"],
    )
    def test_nested_metadata(self, ready: VectorStore, value: object, flat_ok: bool) -> None:
        """Nested stores keep any JSON; flat ones (Chroma) non-empty lists of one scalar type."""
        point = PointWrite(new_id(), payload(0, metadata={"value": value, "plain": 1}), unit(0))
        if self.nested_metadata or flat_ok:
            ready.check_metadata("a.md", {"value": value})
            ready.write([point])
            assert ready.get_points("a.md") == [StoredPoint(point.id, point.payload)]
        else:
            with pytest.raises(InputError, match="value"):
                ready.check_metadata("a.md", {"value": value})
            with pytest.raises(StoreError, match="value") as exc:
                ready.write([PointWrite(new_id(), payload(1), unit(1)), point])
            assert not isinstance(exc.value, StoreUnavailableError)
            info = ready.collection_info()
            assert info is not None and info.points == 0

    @pytest.mark.parametrize(
        "bad_id",
        ["not-a-uuid", str(uuid.uuid4()).upper(), uuid.uuid4().hex, 123, uuid.uuid4(), ""],
        ids=["text", "upper", "hex", "int", "UUID", "empty"],
    )
    def test_point_ids_must_be_canonical_uuids(self, ready: VectorStore, bad_id: Any) -> None:
        with pytest.raises(ConfigError, match="UUID"):
            ready.write(
                [PointWrite(new_id(), payload(0), unit(0)), PointWrite(bad_id, payload(1), unit(1))]
            )
        info = ready.collection_info()
        assert info is not None and info.points == 0

    def test_duplicate_ids_in_one_write_are_refused(self, ready: VectorStore) -> None:
        point_id = new_id()
        with pytest.raises(ConfigError, match="twice"):
            ready.write(
                [
                    PointWrite(point_id, payload(0), unit(0)),
                    PointWrite(point_id, payload(1), unit(1)),
                ]
            )
        assert ready.get_points("a.md") == []

    @pytest.mark.parametrize(
        "vector, error",
        [
            (np.ones(DIM + 2, dtype=np.float32), StoreError),
            (np.array([1.0, math.nan, 0.0, 0.0], dtype=np.float32), ConfigError),
            (np.ones((2, DIM), dtype=np.float32), ConfigError),
            (np.array([], dtype=np.float32), ConfigError),
            (["a", "b", "c", "d"], ConfigError),
        ],
        ids=["dimension", "nan", "2d", "empty", "text"],
    )
    def test_bad_vectors_write_nothing(
        self, ready: VectorStore, vector: Any, error: type[Exception]
    ) -> None:
        with pytest.raises(error):
            ready.write(
                [
                    PointWrite(new_id(), payload(0), unit(0)),
                    PointWrite(new_id(), payload(1), vector),
                ]
            )
        info = ready.collection_info()
        assert info is not None and info.points == 0

    @pytest.mark.parametrize(
        "change",
        [
            {"doc_id": ""},
            {"revision": 3},
            {"ordinal": -1},
            {"ordinal": True},
            {"start": 20, "end": 10},
            {"tokens": 1.5},
            {"version": "2"},
            {"text": None},
            {"metadata": [("a", 1)]},
        ],
        ids=lambda c: "-".join(c),
    )
    def test_bad_payload_fields_write_nothing(
        self, ready: VectorStore, change: dict[str, Any]
    ) -> None:
        with pytest.raises(ConfigError):
            ready.write(
                [
                    PointWrite(new_id(), payload(0), unit(0)),
                    PointWrite(new_id(), payload(1, **change), unit(1)),
                ]
            )
        info = ready.collection_info()
        assert info is not None and info.points == 0
