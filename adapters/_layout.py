"""How a rechunk point is laid out in a Qdrant or Chroma collection, shared by both adapters.

A point carries a :class:`~rechunk.sync.store.PointPayload`. Two layouts put it where a
framework's own vector store class looks for it, so that class can read (and
query) a collection that rechunk wrote:

``layout="langchain"``
    Qdrant (what ``langchain_qdrant.QdrantVectorStore`` reads with its defaults):
    the unnamed dense vector and the payload
    ``{"page_content": text, "metadata": {<rechunk fields>, <document metadata>}}``.
    Chroma (``langchain_chroma.Chroma``): ``documents=[text]`` and the flat
    ``metadatas=[{<rechunk fields>, <document metadata>}]``.

``layout="llamaindex"``
    What ``llama_index``'s ``node_to_metadata_dict`` writes for a ``TextNode``:
    the flat ``{<rechunk fields>, <document metadata>, "_node_content": <TextNode
    JSON>, "_node_type": "TextNode", "doc_id", "document_id", "ref_doc_id"}``. The
    three doc keys hold the rechunk ``doc_id`` (LlamaIndex's ``ref_doc_id``). The
    node's ``id_`` is the point id, its ``text`` the chunk text (Qdrant; on
    Chroma the text is the record's document and the JSON holds ``""``, as
    LlamaIndex's ``ChromaVectorStore`` does), ``start_char_idx``/``end_char_idx``
    the span, its SOURCE relationship the ``doc_id``, its PREVIOUS / NEXT relationships
    the ids of the document's neighbouring chunks (``PointPayload.previous_id`` /
    ``next_id``: a sync keeps them current, updating a point's payload when its
    neighbour changes; read back from the JSON), and the rechunk fields are
    listed in ``excluded_embed_metadata_keys`` and, all but ``doc_id``, in
    ``excluded_llm_metadata_keys``, as are the keys that say how a file was read
    (``format``, ``parser``, ``encoding``, ``delimiter``:
    :data:`rechunk.sources.base.HOW_READ_KEYS`), so LlamaIndex shows embedders the
    document metadata and where a node lies, and LLMs that and the ``doc_id`` too
    (the document a node is from, as a reader's ``file_name``). Qdrant
    stores the vector under the name ``"text-dense"`` (LlamaIndex's default; an
    unnamed vector is read too, as LlamaIndex does). The JSON is built here:
    llama_index need not be installed.

The rechunk fields are ``doc_id, revision, policy, input_key, model_id, ordinal,
start, end, tokens`` and ``version`` (left out when it is ``None``), and ``superseded``
(``1`` on an old revision's point between a sync's marking and its delete, else
absent: see :func:`rechunk.sync.store.mark_superseded`). The framework
adapters (``RechunkTextSplitter`` through ``index()``, ``RechunkNodeParser`` through
LlamaIndex's vector stores) write the same fields under the same names and meanings,
plus ``occurrence`` (and LangChain's ``start_index``/``end_index``), so such points
read back here as rechunk points, PREVIOUS / NEXT included.

Document metadata rules, checked by :func:`prepare_writes` before any I/O:
keys are non-empty ``str`` outside :data:`~rechunk.sync.store.RESERVED_METADATA_KEYS`
(and outside :data:`LLAMAINDEX_KEYS` for the llamaindex layout), values are JSON
values (``str``, ``int`` within 64 bits, finite ``float``, ``bool``, ``None``,
``list``, ``dict`` with ``str`` keys); anything else (tuples, sets, bytes,
datetimes, numpy scalars, NaN) raises :class:`~rechunk.errors.ConfigError`, as
it could not be read back unchanged. Chroma holds flat scalars only: there a
``None``, list or dict value raises :class:`~rechunk.errors.StoreError` naming
the key (flatten it, or store it as a JSON string yourself); rechunk does not
encode it silently, since it could not tell such a string from a real one.
"""

from __future__ import annotations

import contextlib
import json
import uuid
import warnings
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Generic, Literal, TypeVar

import numpy as np

from rechunk.document import json_problem
from rechunk.errors import (
    CollectionMismatchError,
    ConfigError,
    ForeignPointsWarning,
    InputError,
    StoreError,
)
from rechunk.reuse.identity import input_key, is_utf8
from rechunk.sources.base import HOW_READ_KEYS
from rechunk.sync.store import (
    RESERVED_METADATA_KEYS,
    SUPERSEDED_KEY,
    SUPERSEDED_MARK,
    Distance,
    PointPayload,
    PointWrite,
    StoredPoint,
    batches,
)

if TYPE_CHECKING:
    import numpy.typing as npt

__all__ = [
    "DISTANCES",
    "LANGCHAIN_CONTENT_KEY",
    "LANGCHAIN_METADATA_KEY",
    "LAYOUTS",
    "LLAMAINDEX_KEYS",
    "LLAMAINDEX_VECTOR_NAME",
    "ForeignPointError",
    "ForeignPointsWarning",
    "Layout",
    "PreparedWrite",
    "StoreBase",
    "batches",
    "check_batch_size",
    "check_dimension",
    "check_dimensions",
    "check_distance",
    "check_doc_id",
    "check_ids",
    "check_k",
    "check_layout",
    "check_metadata",
    "check_name",
    "check_point_id",
    "check_query_vector",
    "check_vector",
    "check_version",
    "chroma_record",
    "from_chroma",
    "from_qdrant",
    "is_point_id",
    "is_unreachable",
    "layout_vector",
    "prepare_writes",
    "qdrant_payload",
    "rechunk_fields",
]

Layout = Literal["langchain", "llamaindex"]
LAYOUTS: Final[tuple[Layout, ...]] = ("langchain", "llamaindex")
DISTANCES: Final[tuple[Distance, ...]] = ("cosine", "dot", "euclid")

#: ``langchain_qdrant.QdrantVectorStore`` defaults (CONTENT_KEY, METADATA_KEY; VECTOR_NAME is "").
LANGCHAIN_CONTENT_KEY: Final = "page_content"
LANGCHAIN_METADATA_KEY: Final = "metadata"
#: ``llama_index.vector_stores.qdrant`` default dense vector name.
LLAMAINDEX_VECTOR_NAME: Final = "text-dense"

_NODE_CONTENT: Final = "_node_content"
_NODE_TYPE: Final = "_node_type"
_TEXT_NODE: Final = "TextNode"
_SOURCE_RELATIONSHIP: Final = "1"  # llama_index NodeRelationship.SOURCE
_PREVIOUS_RELATIONSHIP: Final = "2"  # NodeRelationship.PREVIOUS
_NEXT_RELATIONSHIP: Final = "3"  # NodeRelationship.NEXT
_TEXT_OBJECT: Final = "1"  # llama_index ObjectType.TEXT
_DOCUMENT_OBJECT: Final = "4"  # llama_index ObjectType.DOCUMENT
#: Keys the llamaindex layout adds beside the metadata; document metadata may not use them.
LLAMAINDEX_KEYS: Final = frozenset({_NODE_CONTENT, _NODE_TYPE, "document_id", "ref_doc_id"})

_FIELDS: Final = (
    "doc_id", "revision", "policy", "input_key", "model_id",
    "ordinal", "start", "end", "tokens", "version",
)  # fmt: skip
_STR_FIELDS: Final = ("doc_id", "revision", "policy", "input_key", "model_id")
_INT_FIELDS: Final = ("ordinal", "start", "end", "tokens")
_INT64: Final = 2**63
#: Key prefixes Chroma refuses in metadata (its own keys, and its filter operators).
_CHROMA_RESERVED_PREFIXES: Final = ("chroma:", "$", "#")
#: The most metadata values (a list counts each item) one Chroma record may hold. Past
#: 5,461 (chromadb 1.5 here) its compaction fails and leaves the collection unwritable
#: for good; the margin leaves room for rechunk's own fields.
CHROMA_MAX_VALUES: Final = 5000


def check_layout(layout: object) -> Layout:
    """``layout`` itself, or :class:`ConfigError` when it is not a known layout."""
    for known in LAYOUTS:
        if layout == known and type(layout) is str:
            return known
    raise ConfigError(f"layout must be one of {', '.join(map(repr, LAYOUTS))}, got {layout!r}")


def layout_vector(layout: Layout, names: Iterable[str], what: str) -> str:
    """The vector of ``names`` (``""``: the unnamed one) that ``layout`` reads: the unnamed
    vector for langchain, ``text-dense`` (else an unnamed one, as LlamaIndex reads it) for
    llamaindex; :class:`StoreError` naming ``what`` (the collection) when there is none."""
    have = set(names)
    wanted = [""] if layout == "langchain" else [LLAMAINDEX_VECTOR_NAME, ""]
    for name in wanted:
        if name in have:
            return name
    need = (
        "an unnamed vector"
        if layout == "langchain"
        else f"the vector {LLAMAINDEX_VECTOR_NAME!r} or an unnamed one"
    )
    raise CollectionMismatchError(
        f"{what} has the named vectors {sorted(have)}; layout={layout!r} needs {need}"
    )


def check_version(version: object) -> int | None:
    """A conditional write's version: a non-negative ``int``, or ``None`` (unconditional)."""
    if version is None:
        return None
    if type(version) is not int or version < 0:
        raise ConfigError(f"version must be a non-negative int or None, got {version!r}")
    return version


def check_name(collection: object) -> str:
    """A collection name: a non-empty ``str``."""
    if type(collection) is not str or not collection.strip():
        raise ConfigError(f"collection must be a non-empty str, got {collection!r}")
    return collection


def check_batch_size(batch_size: object) -> int:
    """A positive ``int`` (``bool`` rejected)."""
    if type(batch_size) is not int or batch_size < 1:
        raise ConfigError(f"batch_size must be a positive int, got {batch_size!r}")
    return batch_size


ClientT = TypeVar("ClientT")
StoreT = TypeVar("StoreT", bound="StoreBase[Any]")


class StoreBase(ABC, Generic[ClientT]):
    """What every store adapter holds: a ready client, a collection, a layout, a batch size.

    The constructor validates the three settings and does no I/O.
    """

    def __init__(
        self,
        client: ClientT,
        collection: str,
        layout: Layout = "langchain",
        *,
        batch_size: int = 256,
    ) -> None:
        self._client = client
        self._collection = check_name(collection)
        self._layout: Layout = check_layout(layout)
        self._batch_size = check_batch_size(batch_size)
        self._foreign: dict[str, str] = {}

    def __repr__(self) -> str:
        return f"{type(self).__name__}(collection={self._collection!r}, layout={self._layout!r})"

    @property
    def collection(self) -> str:
        """The collection name."""
        return self._collection

    @property
    def layout(self) -> Layout:
        """The payload layout (``"langchain"`` or ``"llamaindex"``)."""
        return self._layout

    @property
    def keeps_neighbours(self) -> bool:
        """Whether points keep their neighbours' ids (``PointPayload.previous_id`` /
        ``next_id``): the llamaindex layout writes them as the node's PREVIOUS / NEXT
        relationships; the langchain layout has no place for them and reads ``None``."""
        return self._layout == "llamaindex"

    @property
    def text_locators(self) -> bool:
        """Whether a chunk's locators are stored as text (``pages`` ``"3-4"``, ``section``
        ``"Guide > Setup"``): in the llamaindex layout, as ``RechunkNodeParser`` gives
        them, since LlamaIndex's own stores hold no lists; the langchain layout keeps
        lists."""
        return self._layout == "llamaindex"

    @property
    def client(self) -> ClientT:
        """The client this store was given."""
        return self._client

    def with_collection(self: StoreT, name: str) -> StoreT:
        """A store on another collection (or alias) of the same client and layout."""
        return type(self)(self._client, name, self._layout, batch_size=self._batch_size)

    @property
    def foreign_points(self) -> dict[str, str]:
        """Points this store's reads met and skipped because rechunk did not write them
        (id -> why), e.g. documents another tool added to the collection. They are left
        alone: no sync deletes, rewrites or counts them, and no query returns them."""
        return dict(self._foreign)

    def _decoded(self, point_id: str, decode: Callable[[], PointPayload]) -> StoredPoint | None:
        """``StoredPoint(point_id, decode())``, or ``None`` for a point rechunk did not write
        (noted in :attr:`foreign_points`; a :class:`ForeignPointsWarning` names the first
        such point of each read call that finds new ones)."""
        try:
            return StoredPoint(point_id, decode())
        except ForeignPointError as exc:
            if exc.point_id not in self._foreign:
                self._foreign[exc.point_id] = str(exc)
                warnings.warn(
                    f"skipped a point rechunk did not write and left it alone: {exc} "
                    f"({len(self._foreign)} such point(s) met so far)",
                    ForeignPointsWarning,
                    stacklevel=4,
                )
            return None

    @abstractmethod
    def get_points_many(self, doc_ids: Sequence[str]) -> dict[str, list[StoredPoint]]:
        """:meth:`get_points` of each doc_id, read in as few requests as the store allows."""

    def get_points(self, doc_id: str) -> list[StoredPoint]:
        """Every point of ``doc_id`` (any revision) without vectors, ordered by (ordinal, id)."""
        doc_id = check_doc_id(doc_id)
        return self.get_points_many([doc_id])[doc_id]

    #: whether metadata values must be flat (Chroma: no None, dict or mixed list)
    _flat = False

    def check_metadata(self, doc_id: str, metadata: Mapping[str, Any]) -> None:
        """Raise InputError when this store cannot hold ``metadata`` on the points of
        ``doc_id`` (no I/O): a sync checks every document before it writes anything."""
        try:
            check_metadata(metadata, f"document {doc_id!r}", self._layout, flat=self._flat)
        except (ConfigError, StoreError) as exc:
            raise InputError(str(exc)) from None


def check_dimension(dimension: object) -> int:
    """A positive ``int`` vector dimension."""
    if type(dimension) is not int or dimension < 1:
        raise ConfigError(f"dimension must be a positive int, got {dimension!r}")
    return dimension


def check_distance(distance: object) -> Distance:
    """One of ``"cosine"``, ``"dot"``, ``"euclid"``."""
    for known in DISTANCES:
        if distance == known and type(distance) is str:
            return known
    raise ConfigError(
        f"distance must be one of {', '.join(map(repr, DISTANCES))}, got {distance!r}"
    )


def check_k(k: object) -> int:
    """A positive ``int`` result count."""
    if type(k) is not int or k < 1:
        raise ConfigError(f"k must be a positive int, got {k!r}")
    return k


def check_doc_id(doc_id: object) -> str:
    """A non-empty ``str`` doc_id."""
    if type(doc_id) is not str or not doc_id:
        raise ConfigError(f"doc_id must be a non-empty str, got {doc_id!r}")
    return doc_id


def check_doc_ids(doc_ids: object) -> list[str]:
    """A sequence of doc_ids (:func:`check_doc_id` each), without repeats, in order."""
    if isinstance(doc_ids, str) or not isinstance(doc_ids, Sequence):
        raise ConfigError(f"doc_ids must be a sequence of str, got {doc_ids!r}")
    return list(dict.fromkeys(check_doc_id(d) for d in doc_ids))


def by_doc(points: Iterable[StoredPoint], doc_ids: Sequence[str]) -> dict[str, list[StoredPoint]]:
    """``points`` grouped per doc_id (every one of ``doc_ids`` a key), each group ordered by
    (ordinal, id) as :meth:`VectorStore.get_points` returns it."""
    out: dict[str, list[StoredPoint]] = {doc_id: [] for doc_id in doc_ids}
    for point in points:
        out[point.payload.doc_id].append(point)
    for group in out.values():
        group.sort(key=lambda p: (p.payload.ordinal, p.id))
    return out


def is_point_id(point_id: object) -> bool:
    """Whether ``point_id`` is a UUID in canonical form (lower-case, hyphenated), as
    rechunk's point ids are (another tool's may be anything)."""
    if type(point_id) is not str:
        return False
    try:
        return str(uuid.UUID(point_id)) == point_id
    except ValueError:
        return False


def check_point_id(point_id: object) -> str:
    """A UUID in canonical form (lower-case, hyphenated), as rechunk's point ids are."""
    if is_point_id(point_id):
        return point_id  # type: ignore[return-value]
    raise ConfigError(
        f"point ids must be UUID strings in canonical form (lower-case, hyphenated), "
        f"got {point_id!r}"
    )


def check_ids(ids: Sequence[str]) -> list[str]:
    """Canonical UUID point ids, duplicates dropped (order kept)."""
    if isinstance(ids, str):
        raise ConfigError("ids must be a sequence of point ids, not a single str")
    return list(dict.fromkeys(check_point_id(i) for i in ids))


def check_vector(vector: object, what: str) -> npt.NDArray[np.float32]:
    """A 1-D, non-empty, finite float vector as float32."""
    try:
        array = np.asarray(vector, dtype=np.float32)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{what} is not a vector of numbers: {exc}") from exc
    if array.ndim != 1 or array.size == 0:
        raise ConfigError(f"{what} must be a non-empty 1-D vector, got shape {array.shape}")
    if not np.isfinite(array).all():
        raise ConfigError(f"{what} holds NaN or infinite values")
    return array


def check_query_vector(vector: object, dimension: int) -> npt.NDArray[np.float32]:
    """The query vector as float32; StoreError when its dimension is not the collection's."""
    array = check_vector(vector, "the query vector")
    if dimension and array.size != dimension:
        raise StoreError(
            f"the query vector has {array.size} dimensions; the collection holds "
            f"{dimension}-dimensional vectors"
        )
    return array


def rechunk_fields(payload: PointPayload) -> dict[str, Any]:
    """The rechunk fields of ``payload`` in a fixed order; ``version`` left out when None."""
    fields: dict[str, Any] = {name: getattr(payload, name) for name in _FIELDS}
    if fields["version"] is None:
        del fields["version"]
    if payload.superseded:  # written only when true: a payload written again clears it
        fields[SUPERSEDED_KEY] = SUPERSEDED_MARK
    return fields


# -- validation (before any I/O) ---------------------------------------------------------


@dataclass(frozen=True)
class PreparedWrite:
    """One validated write: ``vector`` is float32, or None for a payload-only update."""

    id: str
    payload: PointPayload
    vector: npt.NDArray[np.float32] | None


def _check_payload(payload: object, point_id: str) -> PointPayload:
    if not isinstance(payload, PointPayload):
        raise ConfigError(
            f"point {point_id}: payload must be a PointPayload, got a {type(payload).__name__}"
        )
    for name in _STR_FIELDS:
        value = getattr(payload, name)
        if type(value) is not str or not value:
            raise ConfigError(f"point {point_id}: {name} must be a non-empty str, got {value!r}")
    for name in _INT_FIELDS:
        value = getattr(payload, name)
        if type(value) is not int or not 0 <= value < _INT64:
            raise ConfigError(f"point {point_id}: {name} must be a non-negative int, got {value!r}")
    if payload.start > payload.end:
        raise ConfigError(f"point {point_id}: start {payload.start} is after end {payload.end}")
    if payload.version is not None and (
        type(payload.version) is not int or not -_INT64 <= payload.version < _INT64
    ):
        raise ConfigError(
            f"point {point_id}: version must be an int or None, got {payload.version!r}"
        )
    if type(payload.text) is not str:
        raise ConfigError(f"point {point_id}: text must be a str, got {type(payload.text)}")
    if not isinstance(payload.metadata, Mapping):
        raise ConfigError(
            f"point {point_id}: metadata must be a mapping, got {type(payload.metadata)}"
        )
    return payload


def _check_json(value: object, where: str) -> None:
    """Raise ConfigError unless ``value`` is a JSON value that reads back unchanged."""
    problem = json_problem(value, where)
    if problem:
        raise ConfigError(problem)


def _flat_list(value: list[Any]) -> bool:
    """A list Chroma (1.5+) stores: non-empty, every item str, or every int, float or bool."""
    kinds = {type(item) for item in value}
    return len(kinds) == 1 and kinds <= {str, int, float, bool}


def check_metadata(metadata: Mapping[str, Any], owner: str, layout: Layout, *, flat: bool) -> None:
    """Check the metadata of ``owner`` (``"point ID"``, ``"document 'ID'"``): reserved
    keys and non-JSON values -> ConfigError; with ``flat`` (Chroma) a None or dict
    value, a list Chroma cannot hold, a key Chroma reserves, or more values than
    :data:`CHROMA_MAX_VALUES` -> StoreError."""
    if flat:
        values = sum(len(v) if type(v) is list else 1 for v in metadata.values())
        if values > CHROMA_MAX_VALUES:
            raise StoreError(
                f"{owner}: metadata holds {values} values (a list counts each item); Chroma "
                f"takes at most about {CHROMA_MAX_VALUES} in one record (more leaves the "
                "collection unwritable): store long lists as a JSON string yourself"
            )
    for key, value in metadata.items():
        where = f"{owner}: metadata {key!r}"
        if type(key) is not str or not key:
            raise ConfigError(f"{owner}: metadata keys must be non-empty str, got {key!r}")
        if key in RESERVED_METADATA_KEYS:
            raise ConfigError(
                f"{where} is reserved for rechunk's own payload "
                f"({', '.join(sorted(RESERVED_METADATA_KEYS))}); rename it"
            )
        if layout == "llamaindex" and key in LLAMAINDEX_KEYS:
            raise ConfigError(
                f"{where} is used by the llamaindex layout "
                f"({', '.join(sorted(LLAMAINDEX_KEYS))}); rename it"
            )
        _check_json(value, where)
        if flat:
            if key.startswith(_CHROMA_RESERVED_PREFIXES):
                raise StoreError(
                    f"{where}: Chroma reserves keys starting with "
                    f"{', '.join(map(repr, _CHROMA_RESERVED_PREFIXES))}; rename it"
                )
            if (
                value is None
                or type(value) is dict
                or (type(value) is list and not _flat_list(value))
            ):
                held = "None" if value is None else f"a {type(value).__name__}"  # never the value
                raise StoreError(
                    f"{where} holds {held}; Chroma metadata values "
                    f"must be str, int, float, bool or a non-empty list of one of those types: "
                    f"flatten it, or store it as a JSON string yourself"
                )


def prepare_writes(
    points: Sequence[PointWrite], layout: Layout, *, flat: bool
) -> list[PreparedWrite]:
    """Validate every write before any I/O: ids, payload fields, metadata, vectors.

    Raises :class:`ConfigError` (bad ids, duplicate ids, bad fields, reserved or
    non-JSON metadata, vectors that are not finite 1-D number arrays) or
    :class:`StoreError` (metadata the store cannot hold, see ``flat``). Vector
    dimensions are checked against the collection by :func:`check_dimensions`.
    """
    if isinstance(points, PointWrite):
        raise ConfigError("write() takes a sequence of PointWrite, not a single one")
    prepared: list[PreparedWrite] = []
    seen: set[str] = set()
    for point in points:
        if not isinstance(point, PointWrite):
            raise ConfigError(f"write() takes PointWrite objects, got {point!r}")
        point_id = check_point_id(point.id)
        if point_id in seen:
            raise ConfigError(f"point {point_id} appears twice in one write")
        seen.add(point_id)
        payload = _check_payload(point.payload, point_id)
        check_metadata(payload.metadata, f"point {point_id}", layout, flat=flat)
        vector = None
        if point.vector is not None:
            vector = check_vector(point.vector, f"the vector of point {point_id}")
        prepared.append(PreparedWrite(point_id, payload, vector))
    return prepared


def check_dimensions(prepared: Sequence[PreparedWrite], dimension: int, where: str) -> None:
    """StoreError unless every vector has ``dimension`` (0: unknown, then all the same one)."""
    for write in prepared:
        if write.vector is None:
            continue
        if not dimension:
            dimension = write.vector.size
        if write.vector.size != dimension:
            raise StoreError(
                f"point {write.id} has a {write.vector.size}-dimensional vector; "
                f"{where} holds {dimension}-dimensional ones"
            )


# -- encoding ----------------------------------------------------------------------------


def _related(node_id: str, node_type: str) -> dict[str, Any]:
    """One ``RelatedNodeInfo`` of a node's relationships, as llama_index serialises it."""
    return {
        "node_id": node_id,
        "node_type": node_type,
        "metadata": {},
        "hash": None,
        "class_name": "RelatedNodeInfo",
    }


def _node_json(point_id: str, payload: PointPayload, metadata: dict[str, Any], text: str) -> str:
    """The TextNode JSON that llama_index's ``metadata_dict_to_node`` parses."""
    # rechunk's fields and how the file was read are shown to neither; the LLM sees the
    # doc_id, the one field that says which document a node is from (a reader's file_name)
    excluded = [key for key in (*_FIELDS, *HOW_READ_KEYS) if key in metadata]
    relationships = {_SOURCE_RELATIONSHIP: _related(payload.doc_id, _DOCUMENT_OBJECT)}
    if payload.previous_id is not None:
        relationships[_PREVIOUS_RELATIONSHIP] = _related(payload.previous_id, _TEXT_OBJECT)
    if payload.next_id is not None:
        relationships[_NEXT_RELATIONSHIP] = _related(payload.next_id, _TEXT_OBJECT)
    node: dict[str, Any] = {
        "id_": point_id,
        "embedding": None,
        "metadata": metadata,
        "excluded_embed_metadata_keys": excluded,
        "excluded_llm_metadata_keys": [key for key in excluded if key != "doc_id"],
        "relationships": relationships,
        "text": text,
        "mimetype": "text/plain",
        "start_char_idx": payload.start,
        "end_char_idx": payload.end,
        "class_name": _TEXT_NODE,
    }
    return json.dumps(node, ensure_ascii=False)


def _llamaindex_dict(point_id: str, payload: PointPayload, *, text_in_node: bool) -> dict[str, Any]:
    metadata = {**rechunk_fields(payload), **payload.metadata}
    flat = dict(metadata)
    flat[_NODE_CONTENT] = _node_json(
        point_id, payload, metadata, payload.text if text_in_node else ""
    )
    flat[_NODE_TYPE] = _TEXT_NODE
    flat["document_id"] = payload.doc_id
    flat["doc_id"] = payload.doc_id
    flat["ref_doc_id"] = payload.doc_id
    return flat


def qdrant_payload(point_id: str, payload: PointPayload, layout: Layout) -> dict[str, Any]:
    """The Qdrant payload of one point in ``layout``."""
    if layout == "langchain":
        return {
            LANGCHAIN_CONTENT_KEY: payload.text,
            LANGCHAIN_METADATA_KEY: {**rechunk_fields(payload), **payload.metadata},
        }
    return _llamaindex_dict(point_id, payload, text_in_node=True)


def chroma_record(
    point_id: str, payload: PointPayload, layout: Layout
) -> tuple[str, dict[str, Any]]:
    """The Chroma ``(document, metadata)`` of one point in ``layout``."""
    if layout == "langchain":
        return payload.text, {**rechunk_fields(payload), **payload.metadata}
    return payload.text, _llamaindex_dict(point_id, payload, text_in_node=False)


# -- decoding ----------------------------------------------------------------------------


class ForeignPointError(StoreError):
    """A point rechunk did not write (it lacks rechunk's fields): another tool's, or another
    layout's. Store reads skip such points and leave them alone (:class:`ForeignPointsWarning`)."""

    def __init__(self, point_id: str, message: str) -> None:
        super().__init__(message)
        self.point_id = point_id


def _foreign(
    point_id: str, collection: str, layout: Layout, why: str, *, foreign: bool = False
) -> StoreError:
    """The error for a point that does not decode: :class:`ForeignPointError` when it lacks
    rechunk's fields (``foreign``), a plain StoreError when it has them with bad values."""
    message = (
        f"point {point_id} in collection {collection!r} is not a rechunk point in the "
        f"{layout} layout ({why}); was it written by another tool or with another layout?"
    )
    return ForeignPointError(point_id, message) if foreign else StoreError(message)


def _payload_from(
    point_id: str,
    fields: Mapping[str, Any],
    text: object,
    collection: str,
    layout: Layout,
    node: Mapping[str, Any] | None = None,
) -> PointPayload:
    missing = [name for name in _FIELDS[:-1] if name not in fields]
    if missing:
        why = f"missing {', '.join(missing)}"
        raise _foreign(point_id, collection, layout, why, foreign=True)
    values: dict[str, Any] = {}
    for name in _STR_FIELDS:
        value = fields[name]
        if type(value) is not str:
            raise _foreign(point_id, collection, layout, f"{name} is a {type(value).__name__}")
        values[name] = value
    for name in (*_INT_FIELDS, "version"):
        value = fields.get(name)
        if name == "version" and value is None:
            continue
        if type(value) is float and value.is_integer():
            value = int(value)  # a JSON number that went through a float
        if type(value) is not int:
            raise _foreign(point_id, collection, layout, f"{name} is a {type(value).__name__}")
        values[name] = value
    if type(text) is not str:
        raise _foreign(point_id, collection, layout, "no text")
    skip = _NOT_METADATA[layout]
    metadata = {key: detached(value) for key, value in fields.items() if key not in skip}
    mark = fields.get(SUPERSEDED_KEY)
    values["superseded"] = type(mark) is int and mark == SUPERSEDED_MARK
    if node is not None:
        values["previous_id"] = _neighbour(node, _PREVIOUS_RELATIONSHIP)
        values["next_id"] = _neighbour(node, _NEXT_RELATIONSHIP)
    values["input_key"] = vector_key(values["input_key"], values["model_id"], text, fields, node)
    return PointPayload(text=text, metadata=metadata, **values)


#: a key the framework adapters' splitters write and a sync does not (adapters._reuse)
_ADAPTER_MARK: Final = "occurrence"


def vector_key(
    claimed: str,
    model_id: str,
    text: str,
    fields: Mapping[str, Any],
    node: Mapping[str, Any] | None,
) -> str:
    """The input key of the string a point's vector was embedded from, as its content
    shows it; ``""`` when that string cannot be made again.

    A point's ``input_key`` (``claimed``) is what its writer says the vector is of. A
    sync writes the key of the text it embeds, but a framework embeds after its splitter
    keyed a chunk and the pipeline may change the string in between: a LlamaIndex
    extractor run after ``RechunkNodeParser`` adds metadata to what is embedded, a
    LangChain transformer run after ``RechunkTextSplitter`` changes ``page_content``.
    So for a point a framework wrote (the node JSON LlamaIndex writes holds
    ``text_template``, which a sync's lacks; the splitters' metadata holds
    ``occurrence``) the key is made again from what that framework embeds: LangChain
    ``page_content``, LlamaIndex ``node.get_content(MetadataMode.EMBED)``. Decoding puts
    it in place of the claim, and ``get_vectors`` hands out a vector only under it, so a
    sync never keeps or shares a vector under a key it was not made from.
    """
    if node is not None:
        if "text_template" not in node:
            return claimed
        embedded = _llamaindex_embedded(node, text)
        if embedded is None:
            return ""
        text = embedded
    elif _ADAPTER_MARK not in fields:
        return claimed
    if not is_utf8(text):
        return ""
    return input_key(model_id, text)


def _llamaindex_embedded(node: Mapping[str, Any], text: str) -> str | None:
    """``TextNode.get_content(MetadataMode.EMBED)`` of a node LlamaIndex serialised (its
    text given apart: a Chroma record keeps it as the document); None when the node's
    templates do not make a string."""
    metadata = node.get("metadata")
    excluded = node.get("excluded_embed_metadata_keys")
    template = node.get("metadata_template", "{key}: {value}")
    separator = node.get("metadata_separator", "\n")
    around = node.get("text_template")
    if not (
        isinstance(metadata, Mapping)
        and isinstance(template, str)
        and isinstance(separator, str)
        and isinstance(around, str)
    ):
        return None
    hidden = set(excluded) if isinstance(excluded, list) else set()
    try:
        header = separator.join(
            template.format(key=key, value=str(value))
            for key, value in metadata.items()
            if key not in hidden
        ).strip()
        if not header:
            return text
        return str(around.format(content=text, metadata_str=header)).strip()
    except (KeyError, IndexError, ValueError, AttributeError):  # a template of its own
        return None


#: the fields of a stored payload that are rechunk's, not the document's metadata
_NOT_METADATA: Final[dict[Layout, frozenset[str]]] = {
    "langchain": RESERVED_METADATA_KEYS,
    "llamaindex": RESERVED_METADATA_KEYS | LLAMAINDEX_KEYS,
}


def detached(value: Any) -> Any:
    """``value``, or for a list or dict a copy that shares no list or dict with it: a
    decoded payload must not change what the store holds (embedded Qdrant hands out its
    own objects) when a caller changes it."""
    if isinstance(value, dict):
        return {k: detached(v) for k, v in value.items()}
    if isinstance(value, list):
        return [detached(v) for v in value]
    return value


def _neighbour(node: Mapping[str, Any], relationship: str) -> str | None:
    """The node id a llamaindex node's PREVIOUS or NEXT relationship names (None without)."""
    relationships = node.get("relationships")
    related = relationships.get(relationship) if isinstance(relationships, Mapping) else None
    node_id = related.get("node_id") if isinstance(related, Mapping) else None
    return node_id if isinstance(node_id, str) else None


def from_qdrant(
    point_id: str, payload: Mapping[str, Any] | None, layout: Layout, collection: str
) -> PointPayload:
    """Decode a Qdrant payload written in ``layout``; StoreError when it is not one."""
    payload = payload or {}
    if layout == "langchain":
        fields = payload.get(LANGCHAIN_METADATA_KEY)
        if not isinstance(fields, Mapping):
            raise _foreign(point_id, collection, layout, "no 'metadata' object", foreign=True)
        return _payload_from(
            point_id, fields, payload.get(LANGCHAIN_CONTENT_KEY), collection, layout
        )
    node = _node(point_id, payload, collection)
    return _payload_from(point_id, payload, node.get("text"), collection, layout, node)


def qdrant_vouches(payload: Mapping[str, Any] | None, layout: Layout) -> str | None:
    """The input key a Qdrant payload's vector is of, when the point says so and its
    content agrees (:func:`vector_key`); None otherwise: another tool's point, or one
    whose writer embedded another string than its key. What ``get_vectors`` checks
    before it hands out a vector."""
    payload = payload or {}
    if layout == "langchain":
        fields, node = payload.get(LANGCHAIN_METADATA_KEY), None
        text = payload.get(LANGCHAIN_CONTENT_KEY)
        if not isinstance(fields, Mapping):
            return None
    else:
        fields, node = payload, _node_or_none(payload)
        if node is None:
            return None
        text = node.get("text")
    return _vouched(fields, text, node)


def vouch_fields(layout: Layout) -> tuple[str, ...]:
    """The payload fields a Qdrant read needs beside ``input_key`` and ``model_id`` for
    :func:`qdrant_vouches`: the text and the adapters' mark (langchain), or the node JSON
    (llamaindex)."""
    if layout == "langchain":
        return LANGCHAIN_CONTENT_KEY, f"{LANGCHAIN_METADATA_KEY}.{_ADAPTER_MARK}"
    return (_NODE_CONTENT,)


def chroma_vouches(
    document: str | None, metadata: Mapping[str, Any] | None, layout: Layout
) -> str | None:
    """:func:`qdrant_vouches` of a Chroma record."""
    fields = metadata or {}
    node = None
    if layout == "llamaindex":
        node = _node_or_none(fields)
        if node is None:
            return None
    return _vouched(fields, document, node)


def _vouched(fields: Mapping[str, Any], text: object, node: Mapping[str, Any] | None) -> str | None:
    claimed, model_id = fields.get("input_key"), fields.get("model_id")
    if not (isinstance(claimed, str) and isinstance(model_id, str) and isinstance(text, str)):
        return None
    if not model_id:  # no key of any model: input_key refuses an empty one
        return None
    return claimed if vector_key(claimed, model_id, text, fields, node) == claimed else None


def _node_or_none(fields: Mapping[str, Any]) -> Mapping[str, Any] | None:
    raw = fields.get(_NODE_CONTENT)
    try:
        node = json.loads(raw) if type(raw) is str else None
    except ValueError:
        return None
    return node if isinstance(node, dict) else None


def _node(point_id: str, fields: Mapping[str, Any], collection: str) -> Mapping[str, Any]:
    """The node JSON of a llamaindex-layout point (``{}`` when it is not an object)."""
    raw = fields.get(_NODE_CONTENT)
    if type(raw) is not str:
        raise _foreign(point_id, collection, "llamaindex", "no '_node_content'", foreign=True)
    try:
        node: Any = json.loads(raw)
    except ValueError as exc:
        raise _foreign(point_id, collection, "llamaindex", f"bad '_node_content': {exc}") from exc
    return node if isinstance(node, dict) else {}


def from_chroma(
    point_id: str,
    document: str | None,
    metadata: Mapping[str, Any] | None,
    layout: Layout,
    collection: str,
) -> PointPayload:
    """Decode a Chroma record written in ``layout``; StoreError when it is not one."""
    fields = metadata or {}
    node = _node(point_id, fields, collection) if layout == "llamaindex" else None
    return _payload_from(point_id, fields, document, collection, layout, node)


# -- error classification ----------------------------------------------------------------

_UNREACHABLE_TEXT: Final = (
    "could not connect",
    "connection refused",
    "failed to connect",
    "name or service not known",
)


def is_unreachable(exc: BaseException) -> bool:
    """Whether ``exc`` (or an exception it wraps) says the server could not be reached.

    Connection refused, DNS failures, timeouts and dropped connections count;
    httpx and gRPC errors are recognised without importing either library.
    """
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        current = todo.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, (ConnectionError, TimeoutError)):
            return True
        for cls in type(current).__mro__:
            if cls.__module__.startswith("httpx") and cls.__name__ in (
                "TransportError",
                "TimeoutException",
            ):
                return True
        code = getattr(current, "code", None)
        if callable(code) and type(current).__module__.startswith("grpc"):
            try:
                name = getattr(code(), "name", "")
            except Exception:
                name = ""
            if name in ("UNAVAILABLE", "DEADLINE_EXCEEDED"):
                return True
        if isinstance(current, ValueError) and any(
            text in str(current).lower() for text in _UNREACHABLE_TEXT
        ):
            return True
        source = getattr(current, "source", None)  # qdrant ResponseHandlingException
        todo.extend([current.__cause__, current.__context__])
        if isinstance(source, BaseException):
            todo.append(source)
    return False


def is_timeout(exc: BaseException) -> bool:
    """Whether ``exc`` (or an exception it wraps) is a request that timed out (httpx's
    timeouts, or gRPC's DEADLINE_EXCEEDED)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, TimeoutError) or any(
            cls.__name__ == "TimeoutException" and cls.__module__.startswith("httpx")
            for cls in type(current).__mro__
        ):
            return True
        code = getattr(current, "code", None)
        if callable(code) and type(current).__module__.startswith("grpc"):
            with contextlib.suppress(Exception):
                if getattr(code(), "name", "") == "DEADLINE_EXCEEDED":
                    return True
        current = current.__cause__ or current.__context__
    return False
