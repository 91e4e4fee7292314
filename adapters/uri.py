"""Open a vector store from a URI (used by the command line).

=============================  ===============================================
URI                            store
=============================  ===============================================
``qdrant:DIR``                 embedded Qdrant persisted in DIR (the default,
                               ``qdrant:.rechunk/qdrant``)
``qdrant::memory:``            embedded Qdrant in memory (tests, experiments)
``qdrant+http://HOST:PORT``    a Qdrant server or cluster; ``qdrant+https://``
                               for TLS; the API key is read from the
                               environment variable ``QDRANT_API_KEY``
``chroma:DIR``                 embedded Chroma persisted in DIR
``chroma+http://HOST:PORT``    a Chroma server (``chroma run``)
=============================  ===============================================
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast
from urllib.parse import urlsplit

from rechunk._optional import require
from rechunk.adapters._layout import Layout, check_layout
from rechunk.errors import ConfigError

__all__ = ["DEFAULT_STORE", "OpenStore", "open_store"]

DEFAULT_STORE = "qdrant:.rechunk/qdrant"
SCHEMES = ("qdrant:", "qdrant+http://", "qdrant+https://", "chroma:", "chroma+http://")


@dataclass
class OpenStore:
    """A store opened from a URI, with the client behind it (close it when done)."""

    uri: str
    kind: str
    store: Any
    client: Any
    extra: dict[str, Any] = field(default_factory=dict)

    def close(self) -> None:
        close = getattr(self.client, "close", None)
        if callable(close):
            # closing a broken client must not hide the real error
            with contextlib.suppress(Exception):
                close()


def _qdrant(uri: str, collection: str, layout: Layout) -> OpenStore:
    qdrant_client = require("qdrant_client", "qdrant", "qdrant-client")
    from rechunk.adapters.qdrant import QdrantStore, local_client

    if uri.startswith("qdrant+"):
        url = uri[len("qdrant+") :]
        parts = urlsplit(url)
        if not parts.hostname:
            raise ConfigError(f"store URI {uri!r} has no host")
        client = qdrant_client.QdrantClient(
            url=url, api_key=os.environ.get("QDRANT_API_KEY") or None, timeout=10
        )
        return OpenStore(uri, "qdrant", QdrantStore(client, collection, layout=layout), client)
    target = uri[len("qdrant:") :]
    if not target:
        raise ConfigError(f"store URI {uri!r} names no folder")
    if target == ":memory:":
        client = qdrant_client.QdrantClient(":memory:")
    else:
        Path(target).mkdir(parents=True, exist_ok=True)
        client = local_client(target)
    return OpenStore(uri, "qdrant", QdrantStore(client, collection, layout=layout), client)


def _chroma(uri: str, collection: str, layout: Layout) -> OpenStore:
    chromadb = require("chromadb", "chroma")
    from rechunk.adapters.chroma import ChromaStore, http_client

    if uri.startswith("chroma+http://"):
        parts = urlsplit(uri[len("chroma+") :])
        if not parts.hostname or not parts.port:
            raise ConfigError(f"store URI {uri!r} needs a host and a port")
        client = http_client(parts.hostname, parts.port)
    else:
        target = uri[len("chroma:") :]
        if not target:
            raise ConfigError(f"store URI {uri!r} names no folder")
        Path(target).mkdir(parents=True, exist_ok=True)
        client = chromadb.PersistentClient(path=target)
    return OpenStore(uri, "chroma", ChromaStore(client, collection, layout=layout), client)


def open_store(uri: str, collection: str, layout: str = "langchain") -> OpenStore:
    """Open the store a URI names (see the module docstring for the forms)."""
    checked = check_layout(cast(Layout, layout))
    if uri.startswith("qdrant"):
        if uri.startswith(("qdrant:", "qdrant+http://", "qdrant+https://")):
            return _qdrant(uri, collection, checked)
    elif uri.startswith("chroma") and uri.startswith(("chroma:", "chroma+http://")):
        return _chroma(uri, collection, checked)
    raise ConfigError(f"unknown store URI {uri!r}; use one of: {', '.join(SCHEMES)}")
