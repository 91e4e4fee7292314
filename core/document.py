"""Documents: a stable id, its text, and the revision the text is."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rechunk.errors import InputError
from rechunk.identity import text_revision

__all__ = ["Document"]


@dataclass(frozen=True)
class Document:
    """One version of a document.

    ``revision`` defaults to a hash of ``text``. ``version``, when given, is a
    monotonic number: a sync never lets an older version overwrite a newer one
    already in the store. ``metadata`` must be JSON-serialisable; it is stored
    beside every chunk but never embedded.
    """

    doc_id: str
    text: str
    revision: str | None = None
    metadata: Mapping[str, Any] | None = None
    version: int | None = field(default=None, kw_only=True)

    def __post_init__(self) -> None:
        if not isinstance(self.doc_id, str) or not self.doc_id:
            raise InputError("Document.doc_id must be a non-empty str")
        if not isinstance(self.text, str):
            raise InputError(f"Document {self.doc_id!r}: text must be a str")
        if self.revision is None:
            object.__setattr__(self, "revision", text_revision(self.text))
        elif not isinstance(self.revision, str) or not self.revision:
            raise InputError(f"Document {self.doc_id!r}: revision must be a non-empty str")
        if self.version is not None and (type(self.version) is not int or self.version < 0):
            raise InputError(f"Document {self.doc_id!r}: version must be a non-negative int")
        if self.metadata is not None:
            if not isinstance(self.metadata, Mapping):
                raise InputError(f"Document {self.doc_id!r}: metadata must be a mapping")
            try:
                json.dumps(dict(self.metadata), allow_nan=False)
            except (TypeError, ValueError) as exc:
                raise InputError(
                    f"Document {self.doc_id!r}: metadata is not JSON-serialisable ({exc})"
                ) from exc
