"""Stable identities: input keys, text hashes and deterministic point ids.

Every hash here is computed over *length-prefixed, domain-separated* fields, so
no two different field tuples can produce the same byte string (``("ab", "c")``
and ``("a", "bc")`` hash differently) and a key of one kind can never collide
with a key of another kind. Changing anything in this module changes stored
identities: bump the domain version and the golden tests together.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Iterable

from rechunk.errors import ConfigError, InputError

__all__ = [
    "POINT_NAMESPACE",
    "hash_fields",
    "input_key",
    "point_id",
    "secret_digest",
    "text_revision",
]

INPUT_KEY_DOMAIN = "rechunk/input-key/v1"
REVISION_DOMAIN = "rechunk/revision/v1"
POINT_DOMAIN = "rechunk/point/v1"
#: Namespace of the UUIDv5 point ids (itself a UUIDv5 of the project URL namespace).
POINT_NAMESPACE = uuid.uuid5(uuid.NAMESPACE_URL, "https://rechunk.dev/ns/point/v1")


def hash_fields(domain: str, fields: Iterable[str | bytes]) -> str:
    """sha256 hex digest of ``domain`` and ``fields``, each prefixed by its byte length."""
    digest = hashlib.sha256()
    for field in (domain, *fields):
        data = field.encode("utf-8") if isinstance(field, str) else field
        digest.update(len(data).to_bytes(8, "big"))
        digest.update(data)
    return digest.hexdigest()


def is_utf8(text: str) -> bool:
    """Whether ``text`` encodes as UTF-8 (a lone surrogate, as ``os.fsdecode`` leaves for a
    byte that is not UTF-8, does not): only such text has byte-exact keys and ids."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def input_key(model_id: str, text: str) -> str:
    """The key under which the embedding of ``text`` by ``model_id`` is stored.

    Only the model identity and the exact embedding-input bytes enter the key:
    the chunker and its parameters do not, so identical text reuses one vector
    whatever produced it.
    """
    if not isinstance(model_id, str) or not model_id:
        raise ConfigError(f"model_id must be a non-empty str, not {model_id!r}")
    if not isinstance(text, str):
        raise InputError(f"text must be a str, not a {type(text).__name__}")
    try:
        return hash_fields(INPUT_KEY_DOMAIN, (model_id, text))
    except UnicodeEncodeError as exc:
        raise InputError(
            f"text holds a lone surrogate at character {exc.start} (not valid UTF-8), so it "
            "has no byte-exact input key"
        ) from None


def text_revision(text: str) -> str:
    """Default revision of a document: a hash of its text (first 32 hex digits)."""
    return hash_fields(REVISION_DOMAIN, (text,))[:32]


def point_id(doc_id: str, key: str, occurrence: int) -> str:
    """Deterministic UUIDv5 of (doc_id, input key, occurrence among equal keys).

    Never a position: inserting a chunk before another leaves the other's id alone.
    """
    name = hash_fields(POINT_DOMAIN, (doc_id, key, str(occurrence)))
    return str(uuid.uuid5(POINT_NAMESPACE, name))


def secret_digest(value: object) -> str:
    """A secret as it enters a model identity: a one-way digest (``sha256-`` and 16 hex
    digits), so that two settings that differ (two keys that pick two deployments) still
    give two identities, and the secret itself is written nowhere. A value that is not
    text is digested as its JSON."""
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    return "sha256-" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]
