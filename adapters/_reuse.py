"""Framework-free machinery shared by the LangChain and LlamaIndex adapters.

Nothing here imports LangChain or LlamaIndex (only rechunk, numpy and the
standard library), so each adapter loads without the other framework.

* ``*_KEY``: the metadata keys both adapters write on a chunk (each adapter
  re-exports them, beside its own).
* :func:`make_chunker` / :func:`default_model_id`: the chunker of a policy and
  the identity that enters chunk keys and ids when the caller names none.
* :func:`keyed_chunks`: each chunk's input key and occurrence, the two fields
  every chunk id is made of (besides the source id).
* :class:`Reuse` / :class:`DocumentsAndQueries`: reuse of vectors by input key
  over an :class:`~rechunk.reuse.cache.EmbeddingCache`, for one model identity, and
  for a model's documents and (under ``model_id + "#query"``) its queries;
  :class:`ReuseReadouts` gives both cached embeddings ``model_id``, ``cache``,
  ``stats`` and ``reset_stats`` from them.
* ``check_*``: the argument checks both adapters make, each raising
  :class:`~rechunk.ConfigError`.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import math
import os
import re
import time
import uuid
import warnings
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from enum import Enum
from pathlib import PurePath
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import numpy as np

from rechunk.chunkers import CDCChunker, FixedChunker, RecursiveChunker, StructuredChunker
from rechunk.chunking.chunk import Chunk, Chunker
from rechunk.document import MAX_NESTING
from rechunk.errors import ConfigError, InputError
from rechunk.reuse.agreement import CheckedBatches, cache_check
from rechunk.reuse.cache import EmbeddingCache, record_dimension, recorded_dimension
from rechunk.reuse.cached_embedder import EmbedStats, StatsCounter
from rechunk.reuse.embedding import check_texts, check_vectors, usable_vectors
from rechunk.reuse.identity import input_key, is_utf8
from rechunk.reuse.identity import secret_digest as _digest

if TYPE_CHECKING:
    import numpy.typing as npt

#: Metadata keys both adapters write on every chunk / node: the fields rechunk.sync's
#: points carry (:data:`rechunk.sync.store.RESERVED_METADATA_KEYS`, ``version`` aside), so one
#: collection has one schema whichever path wrote it, plus ``occurrence`` (the ids need it).
DOC_ID_KEY: Final = "doc_id"
REVISION_KEY: Final = "revision"
POLICY_KEY: Final = "policy"
MODEL_ID_KEY: Final = "model_id"
INPUT_KEY_KEY: Final = "input_key"
ORDINAL_KEY: Final = "ordinal"
SPAN_START_KEY: Final = "start"
SPAN_END_KEY: Final = "end"
TOKENS_KEY: Final = "tokens"
OCCURRENCE_KEY: Final = "occurrence"
#: All of them, in the order they are written.
SCHEMA_KEYS: Final = (
    DOC_ID_KEY, REVISION_KEY, POLICY_KEY, INPUT_KEY_KEY, MODEL_ID_KEY,
    ORDINAL_KEY, SPAN_START_KEY, SPAN_END_KEY, TOKENS_KEY, OCCURRENCE_KEY,
)  # fmt: skip


def warn_replaced_keys(metadatas: Iterable[Mapping[str, Any]], stacklevel: int) -> None:
    """Warn, once for a call, when documents' metadata holds keys of :data:`SCHEMA_KEYS`:
    every chunk gets rechunk's fields under those names, so the document's values (a
    CRM's ``doc_id``, a transcript's ``start`` in seconds) would be lost unsaid."""
    found = sorted({key for metadata in metadatas for key in metadata if key in SCHEMA_KEYS})
    if found:
        warnings.warn(
            f"metadata key(s) {', '.join(found)} of the documents are replaced in every "
            "chunk by rechunk's fields of the same names: rename them before splitting to "
            "keep their values",
            UserWarning,
            stacklevel=stacklevel + 1,
        )


FACTORIES: Final[dict[str, Any]] = {
    "structured": StructuredChunker,
    "cdc": CDCChunker,
    "recursive": RecursiveChunker,
    "fixed": FixedChunker,
}
#: Parameters of LangChain's and LlamaIndex's splitters that users carry over by habit.
_SPLITTER_PARAMETERS: Final = frozenset(
    {"chunk_size", "chunk_overlap", "add_start_index", "length_function", "separators",
     "separator", "keep_separator", "strip_whitespace", "paragraph_separator"}
)  # fmt: skip
_SIZES: Final = {
    "fixed": "max_tokens",
    "recursive": "target_tokens",
    "cdc": "min_tokens and max_tokens",
    "structured": "min_tokens and max_tokens",
}
#: Appended to a model id to key its query vectors apart from its document vectors.
QUERY_SUFFIX: Final = "#query"


# --------------------------------------------------------------------------- chunkers


def make_chunker(
    policy: str | Chunker,
    tokenizer: Any,
    params: Mapping[str, Any],
    receiver: str = "the adapter",
) -> Chunker:
    """The chunker for ``policy``: a kind name with ``tokenizer`` and ``params``, or a ready one.

    A ready :class:`~rechunk.Chunker` (e.g. ``rechunk.policy_for(embedder, "cdc")``)
    is used as it is and then ``tokenizer`` and ``params`` must be empty (the error
    names ``receiver``, the object they were wrongly given to).
    Unknown kinds or parameters raise :class:`~rechunk.ConfigError`.
    """
    if isinstance(policy, Chunker):
        if tokenizer is not None or params:
            raise ConfigError(
                "a ready chunker was given as policy: pass tokenizer and parameters to it, "
                f"not to {receiver}"
            )
        return policy
    if type(policy) is not str or policy not in FACTORIES:
        raise ConfigError(
            f"policy must be one of {', '.join(map(repr, FACTORIES))} or a rechunk Chunker, "
            f"got {policy!r}"
        )
    foreign = sorted(set(params) & _SPLITTER_PARAMETERS)
    if foreign:
        raise ConfigError(
            f"{', '.join(foreign)}: a parameter of the framework's own splitters, not of "
            f"rechunk's {policy!r} chunker. Sizes are in tokens: {_SIZES[policy]}. There is "
            "no overlap (with overlap, every chunk's input would depend on its neighbours), "
            "and offsets are always in the metadata"
        )
    try:
        chunker: Chunker = FACTORIES[policy](tokenizer=tokenizer, **params)
    except TypeError as exc:
        raise ConfigError(f"bad parameters for the {policy!r} chunker: {exc}") from exc
    return chunker


def default_model_id(chunker: Chunker) -> str:
    """Identity used for input keys when none is given: ``"tokenizer:" + tokenizer identity``.

    The chunker's tokenizer stands in for the (unknown) embedding model, and the
    chunker's parameters stay out of the key: identical text keeps its key and
    id when the policy changes. A chunker without a token counter falls back to
    ``"policy:" + policy_id``.
    """
    counter = getattr(chunker, "token_counter", None)
    identity = getattr(counter, "identity", None)
    if isinstance(identity, str) and identity:
        return f"tokenizer:{identity}"
    return f"policy:{chunker.policy_id}"


def keyed_chunks(
    chunks: Iterable[Chunk], model_id: str, seen: Counter[str] | None = None
) -> Iterator[tuple[Chunk, str, int]]:
    """``(chunk, input key, occurrence)`` per chunk, in order.

    The input key is ``input_key(model_id, chunk.text)``; the occurrence counts
    the earlier chunks with the same key (0 for the first), in ``seen`` when
    given (pass one counter for all texts of one source) and updated there.
    """
    if seen is None:
        seen = Counter()
    for chunk in chunks:
        key = input_key(model_id, chunk.text)
        yield chunk, key, seen[key]
        seen[key] += 1


# --------------------------------------------------------------------------- model identity

#: Field names that never change the vectors: batching, concurrency, retries, callbacks.
_OPERATIONAL: Final = frozenset(
    {"callback_manager", "callbacks", "embed_batch_size", "batch_size", "num_workers",
     "max_retries", "retries", "timeout", "request_timeout", "show_progress",
     "show_progress_bar", "verbose", "embeddings_cache", "rate_limiter"}
)  # fmt: skip
#: The words of a key or query parameter name that say it holds a secret (whole words:
#: ``tokenizer_kwargs`` is no token); ``sig`` and ``code`` only in a URL's query (Azure's
#: SAS signature, Azure Functions' key).
_SECRET_WORDS: Final = frozenset(
    {"key", "keys", "apikey", "token", "secret", "secrets", "password", "passwd", "pwd",
     "pass", "passphrase", "credential", "credentials", "creds", "auth", "authorization",
     "bearer", "cookie", "signature", "session", "pat", "sk"}
)  # fmt: skip
#: the endings of a word run together that say it names a secret (``accesstoken``,
#: ``clientsecret``, ``privatekey``)
_SECRET_ENDINGS: Final = ("key", "token", "secret", "password", "passwd", "credentials")
_SECRET_PARAMETERS: Final = frozenset({"sig", "code"})
_NAME_WORDS: Final = re.compile(r"[^A-Za-z0-9]+|(?<=[a-z0-9])(?=[A-Z])")
#: A value that is an HTTP credential by its form (an ``Authorization`` header's value):
#: the whole value one scheme and one token (a prompt that starts "Token ..." is text)
_CREDENTIAL: Final = re.compile(
    r"(?:Bearer|Basic|Token|Digest|Api-?Key|OAuth|SharedAccessSignature) +[\w.~+/=&%-]+", re.I
)
#: a ``name=value`` setting of a connection string (``Endpoint=...;AccountKey=...``)
_CONNECTION_SETTING: Final = re.compile(r"(?:^|(?<=;))(\s*)([\w -]+?)(\s*=\s*)([^;]*)")
_BARE: Final = re.compile(r"[\w./:@+-]*")


def _secret(name: str, parameter: bool = False) -> bool:
    """Whether a dict key or a URL query parameter named ``name`` holds a secret."""
    words = {word.lower() for word in _NAME_WORDS.split(name) if word}
    if words & _SECRET_WORDS or (parameter and words & _SECRET_PARAMETERS):
        return True
    return any(word.endswith(_SECRET_ENDINGS) for word in words)


def _without_secrets(value: object, depth: int = 0) -> object:
    """``value`` with every secret in it as a :func:`_digest`: the values of dict keys
    that name secrets (at any depth), of a URL's query parameters that do
    (``?api_key=...``) and of credential form (``Bearer ...``); a URL with credentials
    (``user:pass@host``) is None (it stays out). Nothing is dropped, so what told two
    models apart still does."""
    if depth > 8:  # a setting that holds itself (or is nested deeper than any config)
        return None
    if isinstance(value, str):
        if _CREDENTIAL.fullmatch(value):
            return _digest(value)
        if ";" in value and "=" in value:  # a connection string: its secret settings
            value = _CONNECTION_SETTING.sub(
                lambda m: m[0] if not _secret(m[2]) else f"{m[1]}{m[2]}{m[3]}{_digest(m[4])}",
                value,
            )
        if "://" not in value:
            return value
        value = _without_credentials(value)
        parts = urlsplit(value)
        query = parse_qsl(parts.query, keep_blank_values=True)
        fragment = parse_qsl(parts.fragment, keep_blank_values=True)  # #access_token=...
        if not any(_secret(k, parameter=True) for k, _ in (*query, *fragment)):
            return value
        hidden = _hidden_params(fragment) if fragment else parts.fragment
        return urlunsplit(parts._replace(query=_hidden_params(query), fragment=hidden))
    if isinstance(value, dict):
        return {
            key: _digest(item)
            if isinstance(key, str) and _secret(key)
            else _without_secrets(item, depth + 1)
            for key, item in value.items()
        }
    if isinstance(value, (list, tuple)):
        if value and all(_pair(item) for item in value):  # headers as (name, value) pairs
            return [
                [key, _digest(item) if _secret(key) else _without_secrets(item, depth + 1)]
                for key, item in value
            ]
        return [_without_secrets(item, depth + 1) for item in value]
    return value


def _without_credentials(url: str) -> str:
    """``url`` with the user information of its authority (``user:password@``) as a
    digest: the host and path still tell two servers apart. The authority ends at the
    first ``/``, ``?`` or ``#``, and its user information at its last ``@`` (a password
    may hold a raw ``@``); a password that holds a ``/`` (``user:pa/ss@host``) is told
    from a port and a path (``host:8080/models/bge@v2``) by what follows the ``:``."""
    scheme, rest = url.split("://", 1)
    authority = re.split(r"[/?#]", rest, maxsplit=1)[0]
    if "@" not in authority:
        before = rest.split("@", 1)[0]
        host, colon, after = before.partition(":")
        if "@" not in rest or not colon or "/" in host or re.match(r"\d+(/|$)", after):
            return url
        authority = before + "@"
    user = authority.rsplit("@", 1)[0]
    return f"{scheme}://{_digest(user)}@{rest[len(user) + 1 :]}"


def _hidden_params(params: list[tuple[str, str]]) -> str:
    """URL parameters encoded again with the values of secret ones as digests."""
    return urlencode([(k, _digest(v) if _secret(k, parameter=True) else v) for k, v in params])


def _pair(item: object) -> bool:
    return isinstance(item, (list, tuple)) and len(item) == 2 and isinstance(item[0], str)


def _identity_value(value: object, nested: bool) -> str | None:
    """``value`` as text in a model identity, or ``None`` when it stays out.

    ``str`` (unquoted when it has no separator characters, else JSON), ``int``,
    finite ``float`` and ``bool`` always; lists and dicts of those only when
    ``nested`` (declared pydantic fields, never an object's run-time state);
    secrets (``SecretStr``), ``None``, clients and other objects never. A URL
    with credentials (``user:pass@host``) stays out; the secrets inside a value (see
    :func:`_without_secrets`) enter as digests.
    """
    if value is None or type(value).__name__.startswith("Secret"):
        return None
    value = _without_secrets(value)
    if value is None:
        return None
    if isinstance(value, str):
        return value if _BARE.fullmatch(value) else json.dumps(value, ensure_ascii=False)
    if isinstance(value, bool | int) or (isinstance(value, float) and math.isfinite(value)):
        return json.dumps(value)
    if nested and isinstance(value, (list, tuple, dict)):
        try:
            return json.dumps(
                value, sort_keys=True, ensure_ascii=False, allow_nan=False, default=_leaf
            )
        except (TypeError, ValueError):
            return None
    return None


def _leaf(value: object) -> object:
    """A value inside a nested setting that JSON has no form for, so that the rest of
    the setting (a ``truncate_dim`` beside a device) still enters the identity: a path,
    a ``torch.device`` or dtype as its text, an enum as its value, a set sorted; any
    other object as its type only (its text may hold a secret)."""
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=lambda item: json.dumps(item, sort_keys=True, default=str))
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, PurePath):
        return os.path.abspath(value)
    if type(value).__module__.split(".")[0] == "torch":
        return str(value)
    return f"<{type(value).__qualname__}>"


def _plain(value: object) -> object:
    """A setting's value as plain data where it is a kind JSON has no form for but that
    only configures: an enum as its value (not one that is also a str, int or float,
    which enters as it did before this was read), a path as its absolute text (a path
    object is local: ``Path("bge")`` in two project folders names two models), a
    pydantic model (an options object) as its fields; any other value as it is."""
    if isinstance(value, Enum) and not isinstance(value, (str, int, float)):
        return _plain(value.value)
    if isinstance(value, PurePath):
        return os.path.abspath(value)
    dump = getattr(value, "model_dump", None)
    if callable(dump) and isinstance(getattr(type(value), "model_fields", None), Mapping):
        return dump()
    return value


def derive_identity(underlying: object, framework: str, _depth: int = 0) -> str:
    """A model identity for any embeddings object: its class path and non-secret configuration.

    ``"<framework>:<module>.<class>(<name>=<value>,...)"``, names sorted. The configuration
    is the object's pydantic fields (LangChain and LlamaIndex models are pydantic models),
    else its public attributes (``__slots__`` too) holding scalars or dicts (a list is
    taken for run-time state, such as a log of calls); in either, an enum enters as its
    value (see :func:`_plain`), a path as its absolute text and a pydantic model (an
    options object) as its fields.
    Also read: an embeddings object
    held by this one (a wrapper such as LlamaIndex's ``LangchainEmbedding``), as its own
    identity; the ``truncate_dim`` and ``default_prompt_name`` a loaded model object was
    given (a private sentence-transformers model); a local path written ``./`` or ``../``,
    made absolute.
    A value JSON has no form for inside a nested setting (a ``torch.device``) enters as
    its short text or its type. A secret enters as a one-way digest (:func:`_digest`), so
    that it is written nowhere while two settings that pick two models still give two
    identities: the value of a setting named for a secret (``api_key``, ``token``, ``pwd``,
    ``creds``, ... as whole words), and inside a dict, a list of header pairs, a
    connection string or a URL (an ``Authorization`` header, ``Api-Key ...``,
    ``AccountKey=``, ``?api_key=``, ``#access_token=``, a URL's ``user:password@``: see
    :func:`_without_secrets`). Left out: names starting with ``_``; ``SecretStr`` values (a
    key held as one: the model cannot depend on it alone); settings that never change the
    vectors (batch sizes, workers, retries, timeouts, callbacks, progress bars); ``None``;
    clients and other objects. Two objects of one class with the same configuration share
    the identity; anything else that changes the vectors (weights fine-tuned in place, a
    model chosen by an environment variable when it embeds) is invisible here: pass
    ``model_id`` then.

    Refused with a :class:`~rechunk.ConfigError` that asks for ``model_id``, since two of
    them would share one identity: an object none of whose settings enters (LlamaIndex's
    ``model_name="unknown"`` counts as none) while it holds state that does not (private
    attributes, clients: a hand-written class keeping its model name in ``self._model``);
    and one with no setting that names a model (a non-empty string under a name such as
    ``model``, ``name``, ``deployment``, ``path`` or ``url``: see :func:`_names_model`;
    not ``device = "cpu"``, ``dimension = 384``, a flag or a secret) while it keeps a
    private value or an object (not a list, set or dict, unless it names a model), or
    while its methods read a variable of the function that made its class
    (``make("bge")``); unless its class names the model in a class attribute (``model =
    "..."``). A framework's own class (LangChain's, LlamaIndex's) is refused only in the
    first case: its fields declare what picks its model. rechunk's own embeddings that
    name their model
    (:class:`~rechunk.adapters.langchain_embeddings.RechunkEmbeddings`,
    :class:`~rechunk.adapters.llamaindex_embedding.RechunkEmbedding`) are that name, the one
    ``rechunk sync`` keys its cache with and records in a collection.
    """
    cls = type(underlying)
    own = getattr(underlying, "model_id", None) if cls.__module__.startswith("rechunk.") else None
    if isinstance(own, str) and own:
        return own
    fields = getattr(cls, "model_fields", None)
    pydantic = isinstance(fields, Mapping) and bool(fields)
    if isinstance(fields, Mapping) and fields:  # (pydantic, spelt out for the type checker)
        items = [(name, getattr(underlying, name, None)) for name in fields]
        items += list((getattr(underlying, "__pydantic_private__", None) or {}).items())
    else:
        items = [*getattr(underlying, "__dict__", {}).items(), *_slot_items(underlying)]
    unknown = _UNKNOWN_MODEL.get(framework)
    parts, unread, hidden = [], [], []
    naming = False  # a setting read names a model (see _names_model)
    for name, value in sorted(items):
        if name in _OPERATIONAL or value is None or type(value).__name__.startswith("Secret"):
            continue
        inside = _embeddings_inside(value, _depth)  # a wrapped model: its own identity
        if inside is not None:
            parts.append(f"{name}=<{inside}>")
            naming = True
            continue
        value = _plain(value)
        # a run-time list of the object's own (a log of calls) is not read; a dict of its
        # own is read like a declared field's (model or encode arguments)
        nested = pydantic or isinstance(value, dict)
        text = None if name.startswith("_") else _identity_value(value, nested)
        if text is None:
            parts.extend(f"{name}.{setting}" for setting in _model_object_settings(value))
            if not name.startswith("__") and not isinstance(value, bool):  # not a flag
                unread.append(name)
                # where a model is kept: a private value or an object (a client), not a
                # list, set or dict (a log of calls, a cache) unless it names a model
                if not isinstance(value, (list, tuple, dict, set)) or _names_model("", value):
                    hidden.append(name)
            continue
        # a plain value under a secret's name (a key that may pick a deployment) as a
        # digest; a SecretStr stays out (its model cannot depend on it alone)
        if _secret(name):
            text = _digest(value)
        elif _names_model(name, value):
            if isinstance(value, str):
                text = _identity_value(_local_path(value), nested) or text
            naming = naming or f"{name}={text}" != unknown
        parts.append(f"{name}={text}")
    identity = f"{framework}:{cls.__module__}.{cls.__qualname__}({','.join(parts)})"
    named = [part for part in parts if part != unknown]
    # state rechunk does not read may hold the model: with no setting read, any such state;
    # with none that names a model (a device, a dimension, a flag, a secret), a private
    # value or an object that is not a log
    at_risk = unread if not named else [] if naming else hidden
    if _framework_class(cls) and named:
        at_risk = []  # a framework's class declares what picks its model in its fields
    if not naming:  # a class made by a function may read the model from its variables
        at_risk = [*at_risk, *_captured(cls)]
    if at_risk and not _class_settings(cls):
        raise ConfigError(
            f"cannot tell which model this {cls.__qualname__} is: no setting of it names one "
            "(a model, name, deployment, path or URL setting), "
            f"and it keeps its state where rechunk does not read it ({', '.join(at_risk[:4])}), "
            "so two such models would share one cache identity and get each other's vectors; "
            "pass model_id='...' naming the model and whatever else changes its vectors (an "
            f"earlier version derived {identity!r}: for one model only, pass that to keep "
            "its cached vectors)"
        )
    return identity


#: a framework's placeholder for a model it was not told the name of (LlamaIndex's
#: ``BaseEmbedding.model_name`` default): not a setting that tells two models apart
_UNKNOWN_MODEL: Final = {"llamaindex": "model_name=unknown"}


#: the top-level packages whose classes' attributes are a framework's, not a user's
#: configuration (and any ``langchain_*`` package)
_FRAMEWORK_PACKAGES: Final = frozenset(
    {"langchain", "llama_index", "pydantic", "builtins", "abc", "typing"}
)


def _framework_class(klass: type) -> bool:
    package = klass.__module__.split(".", 1)[0]
    return package in _FRAMEWORK_PACKAGES or package.startswith("langchain_")


def _class_settings(cls: type) -> bool:
    """Whether ``cls`` or a user's class it derives from names a model in a class
    attribute (``model = "all-MiniLM-L6-v2"``; not ``dimension = 384``): the class then
    fixes its model, and its path (in the identity) tells it apart."""
    return any(
        not name.startswith("_") and _names_model(name, value)
        for klass in cls.__mro__
        if not _framework_class(klass)
        for name, value in vars(klass).items()
    )


def _captured(cls: type) -> list[str]:
    """The variables of an enclosing function that the methods of ``cls`` (or a user's
    class it derives from) read: a class made inside a function (``make("bge")``) keeps
    its model there, where nothing of the object shows it."""
    names: dict[str, None] = {}
    for klass in cls.__mro__:
        if _framework_class(klass):
            continue
        for value in vars(klass).values():
            for function in _functions(value):
                # a function defined inside a method passes its outer variables through
                # the method's own free variables
                for name in function.__code__.co_freevars:
                    if name != "__class__":  # super()'s own
                        names[f"the enclosing variable {name!r}"] = None
    return list(names)


def _functions(value: object) -> list[Any]:
    """The plain functions a class attribute runs: a method, a static or class method's,
    a property's getter, setter and deleter, a cached property's, a partial's."""
    found: list[object]
    if isinstance(value, property):
        found = [value.fget, value.fset, value.fdel]
    else:
        inner = getattr(value, "__func__", None) or getattr(value, "func", None)
        found = [inner if inner is not None else value]
    return [f for f in found if hasattr(f, "__code__")]


#: the words of a setting's name that say it picks a model or the server that runs one
_MODEL_WORDS: Final = frozenset(
    {"model", "models", "name", "deployment", "repo", "checkpoint", "engine", "id", "path",
     "dir", "folder", "file", "url", "uri", "endpoint", "base", "host", "server", "address"}
)  # fmt: skip


def _names_model(name: str, value: object) -> bool:
    """Whether a setting can tell two models apart: a non-empty string, not a secret,
    under a name with a word of :data:`_MODEL_WORDS` (``model_name``, ``azure_deployment``,
    ``base_url``; not ``device`` or ``prompt``), or a dict holding one
    (``params={"model": ...}``)."""
    if isinstance(value, dict):
        return any(
            isinstance(k, str) and isinstance(v, str) and _names_model(k, v)
            for k, v in value.items()
        )
    if not isinstance(value, str) or not value or _secret(name):
        return False
    return any(word.lower() in _MODEL_WORDS for word in _NAME_WORDS.split(name) if word)


def _local_path(value: str) -> str:
    """``value`` made absolute when it is a relative path to a local model (``./model``):
    the same words in two project folders name two models."""
    if value.startswith(("./", "../", ".\\", "..\\")):
        return os.path.abspath(value)
    return value


def _embeddings_inside(value: object, depth: int) -> str | None:
    """The identity of an embeddings object held by another (LlamaIndex's
    ``LangchainEmbedding``, a cache-backed wrapper), else None."""
    if depth >= 3 or isinstance(value, (str, bytes, int, float, dict, list, tuple, set, type)):
        return None
    kind = type(value)  # the class's methods: a client answers any attribute (a proxy, a mock)
    if callable(getattr(kind, "embed_documents", None)):
        return derive_identity(value, "langchain", depth + 1)
    if callable(getattr(kind, "get_text_embedding", None)):
        return derive_identity(value, "llamaindex", depth + 1)
    return None


#: settings of a loaded model object that change its vectors (sentence-transformers'
#: SentenceTransformer, which a wrapper keeps privately and was given them as arguments)
_OBJECT_SETTINGS: Final = ("truncate_dim", "default_prompt_name")


def _model_object_settings(value: object) -> list[str]:
    """``name=value`` of :data:`_OBJECT_SETTINGS` that a model object has set."""
    out = []
    for name in _OBJECT_SETTINGS:
        setting = getattr(value, name, None)
        if isinstance(setting, (str, int)) and not isinstance(setting, bool):
            out.append(f"{name}={setting}")
    return out


def _slot_items(obj: object) -> list[tuple[str, object]]:
    """The attributes an object keeps in ``__slots__`` (set ones only)."""
    names = {
        name
        for klass in type(obj).__mro__
        for name in (getattr(klass, "__slots__", ()) or ())
        if isinstance(name, str) and name not in ("__dict__", "__weakref__")
    }
    return [(name, getattr(obj, name)) for name in sorted(names) if hasattr(obj, name)]


# --------------------------------------------------------------------------- metadata keys


class MetadataKeyError(InputError):
    """A metadata value that has no deterministic text form, so no key can cover it."""


def _tag(kind: str, text: str) -> str:
    return f"{kind}:{text}"


def canonical_value(value: object, where: str, depth: int = 0) -> Any:
    """``value`` as a JSON value that is the same in every run (rule ``meta-v1``).

    JSON values stay as they are (``str``, ``int``, finite ``float``, ``bool``,
    ``None``, lists, ``str``-keyed dicts). Others become tagged strings:
    ``datetime``/``date``/``time`` -> ``"datetime:" + isoformat()`` (its type name,
    then the ISO text, so a date and the same text as ``str`` differ), a path ->
    ``"path:" + as_posix()``, ``uuid.UUID`` -> ``"uuid:" + str``, ``Decimal`` ->
    ``"decimal:" + str``, ``bytes`` -> ``"bytes:" + hex``, a non-finite float ->
    ``"float:nan"`` / ``"float:inf"`` / ``"float:-inf"``; an ``Enum`` is its value;
    numpy scalars their Python value; a tuple is a list; a set is the sorted list
    of its items' canonical JSON under ``{"set": [...]}``; a dict key that is not a
    ``str`` becomes ``"<type>:<repr>"`` (``1`` -> ``"int:1"``). Anything else (an
    arbitrary object, a function) and a ``str`` holding a lone surrogate raise
    :class:`MetadataKeyError` (an :class:`~rechunk.InputError`) naming ``where``, as do
    lists, sets and dicts nested more than :data:`~rechunk.document.MAX_NESTING` deep. A
    numpy array is the list of its items (``tolist()``).
    """
    if depth > MAX_NESTING:
        raise MetadataKeyError(f"{where}: lists and dicts nested more than {MAX_NESTING} deep")
    if value is None or type(value) in (bool, int):
        return value
    if type(value) is str:
        if not is_utf8(value):
            raise MetadataKeyError(
                f"{where} holds a lone surrogate (not valid UTF-8), so no key can cover it"
            )
        return value
    if type(value) is float:
        if math.isfinite(value):
            return value
        return _tag("float", "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf"))
    if isinstance(value, Enum):
        return canonical_value(value.value, where, depth)
    if isinstance(value, (datetime.datetime, datetime.date, datetime.time)):
        return _tag(type(value).__name__, value.isoformat())
    if isinstance(value, PurePath):
        return _tag("path", value.as_posix())
    if isinstance(value, uuid.UUID):
        return _tag("uuid", str(value))
    if isinstance(value, Decimal):
        return _tag("decimal", str(value))
    if isinstance(value, (bytes, bytearray)):
        return _tag("bytes", bytes(value).hex())
    if isinstance(value, str | int | float):  # str/int/float subclasses (and numpy float64)
        return canonical_value(_base(value)(value), where, depth)
    if type(value).__module__ == "numpy" and callable(getattr(value, "tolist", None)):
        return canonical_value(value.tolist(), where, depth)  # type: ignore[attr-defined]
    if isinstance(value, (list, tuple)):
        return [canonical_value(item, f"{where}[{i}]", depth + 1) for i, item in enumerate(value)]
    if isinstance(value, (set, frozenset)):
        items = [canonical_value(item, f"{where} item", depth + 1) for item in value]
        return {"set": sorted(items, key=_dumps)}
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in value.items():
            name = key if type(key) is str else _tag(type(key).__name__, repr(key))
            out[canonical_value(name, f"{where} key {key!r}")] = canonical_value(
                item, f"{where}[{key!r}]", depth + 1
            )
        return out
    raise MetadataKeyError(
        f"{where} is a {type(value).__name__}, which has no deterministic text form, so no key "
        "can cover it: convert it to a str, number, date or JSON value first"
    )


def _base(value: str | int | float) -> type[str] | type[int] | type[float]:
    """The builtin type a ``str``/``int``/``float`` subclass derives from."""
    return str if isinstance(value, str) else int if isinstance(value, int) else float


def _dumps(value: object) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def canonical_json(metadata: Mapping[Any, Any], where: str) -> str:
    """The canonical JSON of ``metadata`` under :func:`canonical_value` (sorted keys)."""
    return _dumps(canonical_value(metadata, where))


# --------------------------------------------------------------------------- checks


def check_model_id(model_id: object) -> str | None:
    """``model_id`` when it is ``None`` or a non-empty ``str``."""
    if model_id is not None and (type(model_id) is not str or not model_id):
        raise ConfigError(f"model_id must be a non-empty str, got {model_id!r}")
    return model_id


def check_cache(cache: object, kinds: str) -> EmbeddingCache:
    """``cache`` when it is an :class:`~rechunk.reuse.cache.EmbeddingCache`; the error lists
    ``kinds``."""
    if not isinstance(cache, EmbeddingCache):
        raise ConfigError(
            f"cache must be a rechunk EmbeddingCache ({kinds}), got {type(cache).__name__}"
        )
    return cache


def check_dimension(dimension: object) -> int | None:
    """``dimension`` when it is ``None`` or a positive ``int``."""
    if dimension is not None and (type(dimension) is not int or dimension < 1):
        raise ConfigError(f"dimension must be a positive int or None, got {dimension!r}")
    return dimension


def check_batch_size(batch_size: object) -> int | None:
    """``batch_size`` when it is ``None`` or a positive ``int``."""
    if batch_size is not None and (type(batch_size) is not int or batch_size < 1):
        raise ConfigError(f"batch_size must be a positive int or None, got {batch_size!r}")
    return batch_size


def check_cache_queries(cache_queries: object) -> bool:
    """``cache_queries`` when it is a ``bool``."""
    if type(cache_queries) is not bool:
        raise ConfigError(f"cache_queries must be a bool, got {cache_queries!r}")
    return cache_queries


# --------------------------------------------------------------------------- reuse


@dataclass
class Plan:
    """One call: every text's key, the vectors found so far, and the distinct misses."""

    texts: list[str]
    key_of: dict[str, str]
    found: dict[str, npt.NDArray[np.float32]]
    missing: list[str]

    def result(self) -> list[list[float]]:
        """The vectors of ``texts`` in order, as lists of floats (float32 values)."""
        return [self.found[self.key_of[text]].tolist() for text in self.texts]


class Reuse:
    """Reuse by input key for one model identity over an EmbeddingCache.

    The dimension is the given one, else the one recorded in the cache for this
    model (a one-element vector under a reserved key, written with the first
    vectors), else learnt from the first vectors the model returns; until it is
    known nothing can be looked up, and nothing can be stored under this model
    either, so every text of that first call is a miss.

    With ``check`` (documents: their vectors are what a collection holds), every call
    that embeds is model-checked against the cache first (:mod:`rechunk.reuse.agreement`):
    the check's one or two short inputs ride in the call's first request, and
    :class:`~rechunk.errors.ModelChangedError` is raised before anything of that call is
    cached or returned when the model no longer agrees with the vectors the cache holds
    (a call with nothing to compare with is not checked and warns:
    :class:`~rechunk.errors.UncheckedModelWarning`). The check's inputs are not counted
    in :attr:`stats`.

    :meth:`embed` / :meth:`aembed` run a whole call: :meth:`plan` looks up, :meth:`batches`
    gives the requests, and :meth:`take` takes each answer.
    """

    def __init__(
        self, cache: EmbeddingCache, model_id: str, dimension: int | None, *, check: bool = True
    ) -> None:
        self.cache = cache
        self.model_id = model_id
        self.dimension = dimension
        self.check = check
        self._recorded = False
        self._stats = StatsCounter()

    @property
    def stats(self) -> EmbedStats:
        return self._stats.snapshot()

    def reset_stats(self) -> None:
        self._stats.reset()

    def _known_dimension(self) -> int | None:
        if self.dimension is None:
            self.dimension = recorded_dimension(self.cache, self.model_id)
            self._recorded = self.dimension is not None
        return self.dimension

    def plan(self, texts: Sequence[str]) -> Plan:
        """Keys of ``texts``, the cached vectors among them, and the distinct misses."""
        items = check_texts(texts)
        key_of = {text: input_key(self.model_id, text) for text in dict.fromkeys(items)}
        dimension = self._known_dimension() if key_of else self.dimension
        found: dict[str, npt.NDArray[np.float32]] = {}
        if dimension is not None and key_of:
            cached = self.cache.get_many(list(key_of.values()), self.model_id, dimension)
            # a cached vector that fails the vector check (all zeros...) is a miss: embedded
            # again, and the new vector replaces it
            found, _ = usable_vectors(cached, dimension)
        missing = [text for text, key in key_of.items() if key not in found]
        self._stats.add(inputs=len(items), hits=len(key_of) - len(missing), misses=len(missing))
        return Plan(items, key_of, found, missing)

    def batches(self, plan: Plan, batch_size: int | None) -> CheckedBatches:
        """The requests of ``plan``'s misses, the model check's inputs first."""
        check = None
        if self.check and plan.missing:
            check = cache_check(
                self.cache, self.model_id, self.dimension, plan.found, key_of=plan.key_of
            )
        return CheckedBatches(check, plan.missing, batch_size)

    def take(self, plan: Plan, batches: CheckedBatches, batch: list[str], raw: object,
             seconds: float) -> None:  # fmt: skip
        """Check the model's answer ``raw`` to ``batch``
        (:func:`~rechunk.reuse.embedding.check_vectors`: :class:`~rechunk.errors.
        BadVectorError` and nothing cached when one fails), settle the model check when its
        vectors are in, then :meth:`absorb` the misses' vectors."""
        vectors = check_vectors(
            raw, model_id=self.model_id, dimension=self.dimension, count=len(batch)
        )
        kept, rows = batches.keep(batch, vectors)
        if kept:
            self.absorb(plan, kept, rows, seconds)

    def absorb(
        self, plan: Plan, batch: list[str], vectors: npt.NDArray[np.float32], seconds: float
    ) -> None:
        """Cache the checked ``vectors`` of ``batch`` and add them to ``plan``."""
        dimension = int(vectors.shape[1])
        keys = [plan.key_of[text] for text in batch]
        rows = [np.ascontiguousarray(row) for row in vectors]
        if not getattr(self.cache, "readonly", False):  # SQLiteCache(readonly=True): reuse only
            self.cache.put_many(zip(keys, rows), self.model_id)
            if not self._recorded:
                record_dimension(self.cache, self.model_id, dimension)
                self._recorded = True
        self.dimension = dimension
        plan.found.update(zip(keys, rows))
        self._stats.add(inputs_embedded=len(batch), seconds_embedding=seconds)

    def embed(
        self,
        texts: Sequence[str],
        embed_batch: Callable[[list[str]], object],
        batch_size: int | None = None,
    ) -> list[list[float]]:
        """Vectors of ``texts`` in order; only the distinct misses go to ``embed_batch``.

        ``embed_batch`` gets ``batch_size`` misses at a time (``None``: all in one
        call, none when everything was cached) and returns one vector per text.
        """
        plan = self.plan(texts)
        batches = self.batches(plan, batch_size)
        for batch in batches:
            started = time.perf_counter()
            raw = embed_batch(batch)
            self.take(plan, batches, batch, raw, time.perf_counter() - started)
        return plan.result()

    async def aembed(
        self,
        texts: Sequence[str],
        embed_batch: Callable[[list[str]], Awaitable[object]],
        batch_size: int | None = None,
    ) -> list[list[float]]:
        """Async :meth:`embed`: cache reads and writes run in a worker thread."""
        plan = await asyncio.to_thread(self.plan, texts)
        batches = await asyncio.to_thread(self.batches, plan, batch_size)
        for batch in batches:
            started = time.perf_counter()
            raw = await embed_batch(batch)
            seconds = time.perf_counter() - started
            await asyncio.to_thread(self.take, plan, batches, batch, raw, seconds)
        return plan.result()


class DocumentsAndQueries:
    """The :class:`Reuse` of a model's documents and of its queries (``model_id + "#query"``);
    ``check``: the documents' model check (off for a model whose identity names its
    weights, ``pins_weights``)."""

    def __init__(
        self, cache: EmbeddingCache, model_id: str, dimension: int | None, *, check: bool = True
    ) -> None:
        self.documents = Reuse(cache, model_id, dimension, check=check)
        # query vectors are not stored: a wrong one misranks a search, and is not checked
        self.queries = Reuse(cache, model_id + QUERY_SUFFIX, dimension, check=False)

    @property
    def cache(self) -> EmbeddingCache:
        """The cache vectors are reused from (the same for documents and queries)."""
        return self.documents.cache

    @property
    def stats(self) -> EmbedStats:
        """Counters of documents and queries together (``tokens_embedded`` stays 0)."""
        d, q = self.documents.stats, self.queries.stats
        return EmbedStats(
            inputs=d.inputs + q.inputs,
            hits=d.hits + q.hits,
            misses=d.misses + q.misses,
            inputs_embedded=d.inputs_embedded + q.inputs_embedded,
            seconds_embedding=d.seconds_embedding + q.seconds_embedding,
        )

    def reset_stats(self) -> None:
        """Set every counter back to zero."""
        self.documents.reset_stats()
        self.queries.reset_stats()

    def for_queries(self) -> Reuse:
        """The queries' :class:`Reuse`, taking the documents' dimension while its own is unknown."""
        if self.queries.dimension is None:
            self.queries.dimension = self.documents.dimension
        return self.queries


class ReuseReadouts:
    """``model_id``, ``cache``, ``stats`` and ``reset_stats`` of an adapter's cached embedding.

    A mixin for the framework class: the subclass sets ``self._reuse``.
    """

    _reuse: DocumentsAndQueries

    @property
    def model_id(self) -> str:
        """The model identity in every input key."""
        return self._reuse.documents.model_id

    @property
    def cache(self) -> EmbeddingCache:
        """The cache vectors are reused from."""
        return self._reuse.cache

    @property
    def stats(self) -> EmbedStats:
        """Counters of documents (texts) and queries together (``tokens_embedded`` stays 0)."""
        return self._reuse.stats

    def reset_stats(self) -> None:
        """Set every counter back to zero."""
        self._reuse.reset_stats()
