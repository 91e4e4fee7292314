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
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast
from urllib.parse import urlsplit

from rechunk._optional import require
from rechunk.adapters._layout import Layout, check_layout
from rechunk.errors import ConfigError, StoreError, StoreUnavailableError

__all__ = ["DEFAULT_STORE", "OpenStore", "open_store", "store_exists"]

DEFAULT_STORE = "qdrant:.rechunk/qdrant"
SCHEMES = ("qdrant:", "qdrant+http://", "qdrant+https://", "chroma:", "chroma+http://")
#: How long a server may take to answer the first request before the CLI gives up (the
#: clients themselves wait much longer, or, Chroma's, for ever).
PROBE_SECONDS = 10.0
#: The file an embedded store writes into its folder when it is first opened.
_MARKERS = {"qdrant:": "meta.json", "chroma:": "chroma.sqlite3"}


def _local(uri: str) -> tuple[Path, str] | None:
    """The folder of an embedded store and the file that marks it; None for a server."""
    for scheme, marker in _MARKERS.items():
        if uri.startswith(scheme) and uri[len(scheme) :] and uri != "qdrant::memory:":
            return Path(uri[len(scheme) :]), marker
    return None


def store_exists(uri: str) -> bool:
    """False when ``uri`` names an embedded store folder that holds no store yet."""
    local = _local(uri)
    return local is None or (local[0] / local[1]).is_file()


def _folder(uri: str, create: bool) -> str:
    """The folder of an embedded store, created only when ``create`` is set."""
    local = _local(uri)
    if local is None:
        raise ConfigError(f"store URI {uri!r} names no folder")
    folder, marker = local
    if folder.exists() and not folder.is_dir():
        raise ConfigError(f"store URI {uri!r} names {folder}, which is a file, not a folder")
    if not (folder / marker).is_file():
        if not create:
            raise StoreError(f"no store at {folder} (nothing synced there yet)")
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(
                f"cannot create the store folder {folder}: {exc.strerror or exc}"
            ) from exc
    return str(folder)


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


def _qdrant(uri: str, collection: str, layout: Layout, create: bool) -> OpenStore:
    qdrant_client = require("qdrant_client", "qdrant", "qdrant-client")
    from rechunk.adapters.qdrant import QdrantStore, local_client

    if uri.startswith("qdrant+"):
        url = uri[len("qdrant+") :]
        host, port = _host_port(uri, required_port=False)
        key = os.environ.get("QDRANT_API_KEY")
        _probe(uri, host, port or 6333, "/", {"api-key": key} if key else {})
        # the client checks the server's version in a thread of its own and warns in two
        # lines when it cannot; the request that follows reports that failure in one
        warnings.filterwarnings("ignore", message="Failed to obtain server version")
        try:
            client = qdrant_client.QdrantClient(url=url, api_key=key or None, timeout=10)
        except ValueError as exc:  # urllib3's LocationParseError among them
            raise ConfigError(f"store URI {uri!r} is not a valid URL: {exc}") from exc
        return OpenStore(uri, "qdrant", QdrantStore(client, collection, layout=layout), client)
    if uri == "qdrant::memory:":
        client = qdrant_client.QdrantClient(":memory:")
    else:
        client = local_client(_folder(uri, create))
    return OpenStore(uri, "qdrant", QdrantStore(client, collection, layout=layout), client)


def _host_port(uri: str, *, required_port: bool) -> tuple[str, int | None]:
    """The host and port of a server URI; ConfigError when either is missing or invalid."""
    try:
        parts = urlsplit(uri.split("+", 1)[1])
        port = parts.port
    except ValueError as exc:  # a bad port, or a bracket that is not closed
        raise ConfigError(f"store URI {uri!r} is not a valid URL: {exc}") from exc
    if not parts.hostname:
        raise ConfigError(f"store URI {uri!r} has no host")
    if required_port and not port:
        raise ConfigError(f"store URI {uri!r} needs a host and a port")
    return parts.hostname, port


def _probe(uri: str, host: str, port: int, path: str, headers: dict[str, str]) -> None:
    """StoreUnavailableError when the server accepts no request within PROBE_SECONDS; any
    answer (an error status included) or a refused connection is left to the client."""
    import httpx

    scheme = "https" if "+https://" in uri else "http"
    netloc = f"[{host}]" if ":" in host else host
    try:
        httpx.get(f"{scheme}://{netloc}:{port}{path}", headers=headers, timeout=PROBE_SECONDS)
    except httpx.InvalidURL as exc:  # a host such as 256.256.256.256
        raise ConfigError(f"store URI {uri!r} is not a valid URL: {exc}") from None
    except httpx.TimeoutException:
        raise StoreUnavailableError(
            f"the server at {uri} did not answer within {PROBE_SECONDS:g} s"
        ) from None
    except httpx.HTTPError:
        return


def _chroma(uri: str, collection: str, layout: Layout, create: bool) -> OpenStore:
    chromadb = require("chromadb", "chroma")
    from rechunk.adapters.chroma import ChromaStore, http_client

    if uri.startswith("chroma+http://"):
        host, port = _host_port(uri, required_port=True)
        assert port is not None
        _probe(uri, host, port, "/api/v2/heartbeat", {})
        client = http_client(host, port)
    else:
        client = chromadb.PersistentClient(path=_folder(uri, create))
    return OpenStore(uri, "chroma", ChromaStore(client, collection, layout=layout), client)


def open_store(
    uri: str, collection: str, layout: str = "langchain", *, create: bool = True
) -> OpenStore:
    """Open the store a URI names (see the module docstring for the forms).

    With ``create=False`` an embedded store folder that holds no store yet is a
    :class:`StoreError` and nothing is written (read-only commands).
    """
    checked = check_layout(cast(Layout, layout))
    if uri.startswith("qdrant"):
        if uri.startswith(("qdrant:", "qdrant+http://", "qdrant+https://")):
            return _qdrant(uri, collection, checked, create)
    elif uri.startswith("chroma") and uri.startswith(("chroma:", "chroma+http://")):
        return _chroma(uri, collection, checked, create)
    raise ConfigError(f"unknown store URI {uri!r}; use one of: {', '.join(SCHEMES)}")
