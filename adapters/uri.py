"""Open a vector store from a URI (used by the command line).

=============================  ===============================================
URI                            store
=============================  ===============================================
``qdrant:DIR``                 embedded Qdrant persisted in DIR (the default,
                               ``qdrant:.rechunk/qdrant``)
``qdrant::memory:``            embedded Qdrant in memory (tests, experiments)
``qdrant-edge:DIR``            Qdrant Edge (Qdrant's engine in-process) in DIR:
                               opens millions of points in a fraction of a
                               second; qdrant-client cannot read it
``qdrant+http://HOST:PORT``    a Qdrant server or cluster; ``qdrant+https://``
                               for TLS; the API key is read from the
                               environment variable ``QDRANT_API_KEY``
``chroma:DIR``                 embedded Chroma persisted in DIR
``chroma+http://HOST:PORT``    a Chroma server (``chroma run``); ``chroma+https://``
                               for TLS (port 443 unless given); credentials from
                               Chroma's own environment variables
                               ``CHROMA_CLIENT_AUTH_PROVIDER`` and
                               ``CHROMA_CLIENT_AUTH_CREDENTIALS``
=============================  ===============================================

A Chroma server URI may name the tenant and database to use in a query:
``chroma+http://HOST:PORT?tenant=T&database=D`` (either alone, after a prefix too:
``chroma+https://HOST/chroma?database=D``; form-encoded: ``+`` is a space, ``%2B`` a
plus). One it does not name is Chroma's default
(``default_tenant`` / ``default_database``); leaving one out while Chroma's own
``CHROMA_TENANT`` / ``CHROMA_DATABASE`` names another is a :class:`ConfigError`, so that a
URI names one store whatever the environment. Both must exist on the server: rechunk
creates neither (:class:`ConfigError` when one is missing).

A server URI may end in a path (``qdrant+http://HOST:6333/qdrant``, a server behind a
reverse proxy under that prefix). HOST may be an IPv6 address in brackets, with a zone
id as RFC 6874 writes it (``[fe80::1%25eth0]``) or as is (``[fe80::1%eth0]``). A user,
password, fragment or any other query in a server URI is refused (:class:`ConfigError`)
rather than dropped: rechunk records store URIs in ``.rechunk/manifest.json``, so secrets come
from the environment.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit

from rechunk._optional import require
from rechunk.adapters._layout import Layout, check_layout
from rechunk.errors import ConfigError, StoreError, StoreUnavailableError

__all__ = [
    "DEFAULT_STORE",
    "OpenStore",
    "canonical_uri",
    "chroma_names",
    "chroma_place",
    "open_store",
    "resolved_uri",
    "store_exists",
]

DEFAULT_STORE = "qdrant:.rechunk/qdrant"
SCHEMES = (
    "qdrant:",
    "qdrant+http://",
    "qdrant+https://",
    "qdrant-edge:",
    "chroma:",
    "chroma+http://",
    "chroma+https://",
)
#: Chroma's own environment variables for the tenant and database a client uses (its
#: ``CloudClient`` reads them; rechunk reads them for a server URI that names neither).
TENANT_ENV, DATABASE_ENV = "CHROMA_TENANT", "CHROMA_DATABASE"
#: Chroma's defaults (``chromadb.config.DEFAULT_TENANT`` and ``DEFAULT_DATABASE``).
DEFAULT_TENANT, DEFAULT_DATABASE = "default_tenant", "default_database"
#: The port rechunk reaches on a server scheme whose URI gives none (a
#: ``chroma+http://`` URI must give one: Chroma's own 8000 is not assumed).
_DEFAULT_PORTS = {"chroma+https": 443, "qdrant+http": 6333, "qdrant+https": 6333}
#: What the query of a Chroma server URI may name.
_CHROMA_QUERY = ("tenant", "database")
#: Where a Chroma server's credentials come from instead of its URI.
_CHROMA_SECRETS = (
    "CHROMA_CLIENT_AUTH_PROVIDER and CHROMA_CLIENT_AUTH_CREDENTIALS (Chroma's own settings)"
)
#: How long a server may take to answer the first request before the CLI gives up (the
#: clients themselves wait much longer, or, Chroma's, for ever).
PROBE_SECONDS = 10.0
#: Where the command line records the store URIs it synced (so no secret may be in one).
_MANIFEST = ".rechunk/manifest.json"
#: The file an embedded store writes into its folder when it is first opened.
_MARKERS = {"qdrant:": "meta.json", "qdrant-edge:": "edge.json", "chroma:": "chroma.sqlite3"}
_KINDS = {"qdrant:": "an embedded Qdrant store", "qdrant-edge:": "a Qdrant Edge store",
          "chroma:": "an embedded Chroma store"}  # fmt: skip


def _local(uri: str) -> tuple[Path, str] | None:
    """The folder of an embedded store and the file that marks it; None for a server."""
    for scheme, marker in _MARKERS.items():
        if uri.startswith(scheme) and uri[len(scheme) :] and uri != "qdrant::memory:":
            return Path(uri[len(scheme) :]), marker
    return None


def _scheme(uri: str) -> str:
    """The scheme of an embedded store's URI (``qdrant-edge:``)."""
    return next(scheme for scheme in _MARKERS if uri.startswith(scheme))


def canonical_uri(uri: str) -> str:
    """One spelling of the store ``uri`` names: an embedded store's folder made absolute
    (``qdrant:./kb``, ``qdrant:kb/`` and ``qdrant:/home/me/kb`` from ``/home/me`` are one
    store), a server's without a trailing ``/``, with its scheme and host in lower case and
    without the port rechunk reaches when none is given (``chroma+https://HOST:443`` is
    ``chroma+https://HOST``, ``qdrant+http://HOST:6333`` is ``qdrant+http://HOST``). What
    the command line records about a store is keyed by it."""
    local = _local(uri)
    if local is not None:
        return _scheme(uri) + os.path.realpath(local[0])
    head, sep, rest = uri.partition("://")
    if not sep:
        return uri
    query = ""
    if head.lower() in ("chroma+http", "chroma+https"):
        # the tenant and database its query names, those that are not Chroma's defaults
        # written as a query (the defaults left out, so what earlier versions recorded
        # under the bare URI is still found). Never the environment's: a key must name
        # one store whatever the environment of the process that reads it.
        with contextlib.suppress(ConfigError):
            server = _server(uri, required_port=False, secrets=_CHROMA_SECRETS,
                             query=_CHROMA_QUERY)  # fmt: skip
            place = zip(_CHROMA_QUERY, _named(server), (DEFAULT_TENANT, DEFAULT_DATABASE))
            named = [(key, value) for key, value, default in place if value != default]
            rest = re.split("[?#]", rest, maxsplit=1)[0]
            query = "?" + urlencode(named) if named else ""
    host, slash, path = rest.partition("/")
    return f"{head.lower()}://{_netloc(head, host)}{slash}{path}".rstrip("/") + query


def _netloc(head: str, netloc: str) -> str:
    """``netloc`` (``HOST:PORT``) of a server URI on the scheme ``head`` in one spelling:
    in lower case, and without the port rechunk uses when none is given
    (:data:`_DEFAULT_PORTS`), so that ``chroma+https://HOST`` and
    ``chroma+https://HOST:443`` are one store."""
    netloc = netloc.lower()
    default = _DEFAULT_PORTS.get(head.lower())
    name, colon, port = netloc.rpartition(":")
    if default is None or not colon or "]" in port:  # no port given (``[::1]``)
        return netloc
    given = int(port) if port.isascii() and port.isdigit() else None
    # ``HOST:`` (an empty port: the default too) is ``HOST``
    return name if not port or given == default else netloc


def chroma_place(uri: str) -> tuple[str, str]:
    """The tenant and database a Chroma server URI (``chroma+http://``,
    ``chroma+https://``) reaches: those its query names (``?tenant=T&database=D``), else
    Chroma's defaults (see :func:`chroma_names` for ``CHROMA_TENANT`` /
    ``CHROMA_DATABASE``). A :class:`ConfigError` for a URI that is not valid."""
    server = _server(uri, required_port=False, secrets=_CHROMA_SECRETS, query=_CHROMA_QUERY)
    return chroma_names(server.query.get("tenant"), server.query.get("database"))


def resolved_uri(uri: str) -> str:
    """``uri`` with the tenant and database it reaches written in, so that another process
    (a Ray worker on another machine, whose environment may differ) reaches the same
    store: ``chroma+http://HOST:PORT?tenant=T&database=D``; any other URI is returned as
    it is."""
    if not uri.startswith(("chroma+http://", "chroma+https://")):
        return uri
    tenant, database = chroma_place(uri)
    bare = re.split("[?#]", uri, maxsplit=1)[0]
    return f"{bare}?{urlencode([('tenant', tenant), ('database', database)])}"


def _named(server: _Server) -> tuple[str, str]:
    """The tenant and database a Chroma server URI's query names, else Chroma's defaults."""
    return (
        server.query.get("tenant", DEFAULT_TENANT),
        server.query.get("database", DEFAULT_DATABASE),
    )


def chroma_names(tenant: str | None, database: str | None) -> tuple[str, str]:
    """The tenant and database a Chroma client given ``tenant`` and ``database`` (None:
    not given) uses: those given, else Chroma's defaults. A :class:`ConfigError` for a
    name that a request path cannot carry, and for one left out while Chroma's own
    ``CHROMA_TENANT`` / ``CHROMA_DATABASE`` names another: Chroma's ``HttpClient`` does
    not read those variables (its ``CloudClient`` does), and rechunk does not either, so
    that a store URI names one store whatever the environment; a sync must not land in
    the default database while the user meant the variable's."""
    found = []
    for key, given, variable, default in (
        ("tenant", tenant, TENANT_ENV, DEFAULT_TENANT),
        ("database", database, DATABASE_ENV, DEFAULT_DATABASE),
    ):
        if given is not None:
            _check_place(f"{key}=", key, given)
            found.append(given)
            continue
        meant = os.environ.get(variable)
        if meant and meant != default:
            raise ConfigError(
                f"{variable} is set to {meant!r}, but no {key} is named: rechunk reaches the "
                f"Chroma {key} a store URI names (?{key}=NAME; http_client's {key}=), else "
                f"{default!r}, never the environment's; name {meant!r} there, or unset "
                f"{variable}"
            )
        found.append(default)
    return found[0], found[1]


def _check_place(source: str, key: str, value: str) -> None:
    """A :class:`ConfigError` for a tenant or database name a request path cannot carry."""
    if not value or "/" in value or value in (".", ".."):
        raise ConfigError(
            f"{source} names the Chroma {key} {value!r}, which is not a {key} name (empty, "
            "'.', '..' or with a '/')"
        )


def store_exists(uri: str) -> bool:
    """False when ``uri`` names an embedded store folder that holds no store yet (a
    :class:`ConfigError` when it names a server on a folder's scheme)."""
    local = _local(uri)
    if local is not None:
        _not_a_server(uri)
    return local is None or (local[0] / local[1]).is_file()


def _not_a_server(uri: str) -> None:
    """A :class:`ConfigError` for a server written on a folder's scheme
    (``qdrant://HOST:PORT`` for ``qdrant+http://``), which would make a store in
    ``/HOST:PORT``; ``qdrant:///abs/path``, a file URL's three slashes, is a folder."""
    scheme = _scheme(uri)
    rest = uri[len(scheme) :]
    if rest.startswith("//") and not rest.startswith("///"):
        server = {"qdrant:": "qdrant+http://HOST:PORT (or qdrant+https://)",
                  "chroma:": "chroma+http://HOST:PORT"}.get(scheme)  # fmt: skip
        raise ConfigError(
            f"store URI {uri!r} reads as a server's, but {scheme} is a folder: "
            + (f"a server is {server}; " if server else "")
            + f"a folder is {scheme}DIR ({scheme}/abs/path for an absolute one)"
        )


def _folder(uri: str, create: bool) -> str:
    """The folder of an embedded store, created only when ``create`` is set."""
    local = _local(uri)
    if local is None:
        raise ConfigError(f"store URI {uri!r} names no folder")
    folder, marker = local
    _not_a_server(uri)
    if folder.exists() and not folder.is_dir():
        raise ConfigError(f"store URI {uri!r} names {folder}, which is a file, not a folder")
    if not (folder / marker).is_file():
        for scheme, other in _MARKERS.items():
            if other != marker and (folder / other).is_file():
                # read as nothing there, and a sync made a second store inside it
                raise ConfigError(
                    f"{folder} holds {_KINDS[scheme]} ({other}), not {_KINDS[_scheme(uri)]}: "
                    f"open it as {scheme}{folder}"
                )
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
    #: an embedded store's folder, the file that marks it, and what the folder was when
    #: opened (device, inode)
    folder: Path | None = field(default=None, init=False)
    _marker: Path | None = field(default=None, init=False, repr=False)
    _opened_as: tuple[int, int] | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        local = _local(self.uri)
        if local is not None:
            self.folder, self._marker = local[0], local[0] / local[1]
            with contextlib.suppress(OSError):
                found = os.stat(self.folder)
                self._opened_as = (found.st_dev, found.st_ino)

    def check_on_disk(self) -> None:
        """A :class:`StoreError` when an embedded store's folder was removed or replaced
        since it was opened: its client wrote on to files no longer there (its own
        reads, and so a stale check, still find what it wrote), so nothing of it is kept.
        A server's store: nothing to check."""
        if self.folder is None or self._marker is None:
            return
        try:
            found = os.stat(self.folder)
            kept = (found.st_dev, found.st_ino) == self._opened_as and self._marker.is_file()
        except OSError:
            kept = False
        if not kept:
            raise StoreError(
                f"the store folder {self.folder} was removed or replaced while this command "
                "ran: what it wrote is not there; run it again"
            )

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
        server = _server(uri, required_port=False, secrets="QDRANT_API_KEY")
        port = server.port or _DEFAULT_PORTS["qdrant+http"]
        server = _Server(server.scheme, server.host, port, server.path)
        url = server.url()
        key = os.environ.get("QDRANT_API_KEY")
        _probe(uri, server, server.path + "/", {"api-key": key} if key else {})
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


@dataclass(frozen=True)
class _Server:
    """What a server URI names: ``host`` (an IPv6 address without brackets, its zone id
    decoded: ``fe80::1%eth0``), ``port``, ``path`` (``""`` or ``/a/b``, as written) and
    ``query``."""

    scheme: str
    host: str
    port: int | None
    path: str
    #: what its query names (only the keys the scheme takes: a Chroma server's tenant and
    #: database), decoded
    query: dict[str, str] = field(default_factory=dict)

    @property
    def netloc(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port is None else f"{host}:{self.port}"

    def url(self, path: str | None = None) -> str:
        return f"{self.scheme}://{self.netloc}{self.path if path is None else path}"


#: RFC 6874's ZoneID characters (unreserved), once decoded
_ZONE = re.compile(r"[A-Za-z0-9._~-]+")


def _server(uri: str, *, required_port: bool, secrets: str, query: tuple[str, ...] = ()) -> _Server:
    """The parts of a server URI; ConfigError when the host or port is missing or invalid,
    and when it holds what would be dropped (a user or password: ``secrets`` names the
    environment variables they go in instead; a fragment, or a query that names anything
    but the keys in ``query``, each once)."""
    try:
        parts = urlsplit(uri.split("+", 1)[1])
        port = parts.port
    except ValueError as exc:  # a bad port, or a bracket that is not closed
        raise ConfigError(f"store URI {uri!r} is not a valid URL: {exc}") from exc
    if parts.username is not None or parts.password is not None:
        shown = uri.replace(parts.netloc, "***@" + parts.netloc.rpartition("@")[2], 1)
        raise ConfigError(
            f"store URI {shown!r} holds credentials, which rechunk does not read from a URI "
            f"(it records store URIs in {_MANIFEST}): set {secrets} in the environment instead"
        )
    shown = re.split("[?#]", uri, maxsplit=1)[0]  # a query may hold a secret
    if (parts.query and not query) or parts.fragment or uri.endswith(("?", "#")):
        raise ConfigError(
            f"store URI {shown!r} is followed by a query or fragment ('?...', '#...'), which "
            f"would be ignored: remove it (credentials come from {secrets} in the environment)"
        )
    named = _query(uri, shown, parts.query, query, secrets) if parts.query else {}
    if not parts.hostname:
        raise ConfigError(f"store URI {uri!r} has no host")
    if required_port and not port:
        raise ConfigError(f"store URI {uri!r} needs a host and a port")
    host = parts.hostname
    netloc = parts.netloc.rpartition("@")[2]
    if netloc.startswith("[") and "]" in netloc:
        host = _ipv6(uri, netloc[1 : netloc.index("]")])
    return _Server(parts.scheme, host, port, parts.path.rstrip("/"), named)


def _query(uri: str, shown: str, text: str, keys: tuple[str, ...], secrets: str) -> dict[str, str]:
    """What the query ``text`` of a server URI names, decoded: each of ``keys`` at most
    once, with a value; anything else is a ConfigError that quotes none of it (a query may
    hold a secret)."""
    takes = " and ".join(f"{key}=" for key in keys)
    try:
        pairs = parse_qsl(text, keep_blank_values=True, strict_parsing=True)
    except ValueError:
        pairs = [("", "")]
    if any(key not in keys for key, _ in pairs):
        raise ConfigError(
            f"store URI {shown!r} is followed by a query that names something other than "
            f"{takes}, which would be ignored: remove it (credentials come from {secrets} "
            "in the environment, never from the URI)"
        )
    named: dict[str, str] = {}
    for key, value in pairs:  # only keys it takes: the URI may be quoted
        if key in named:
            raise ConfigError(f"store URI {uri!r} names the {key} more than once")
        _check_place(f"store URI {uri!r}", key, value)
        named[key] = value
    return named


def _ipv6(uri: str, literal: str) -> str:
    """An IPv6 literal of a URI (without brackets) as a socket takes it: the zone id
    written as RFC 6874 says (``%25eth0``) or as is (``%eth0``) becomes ``%eth0`` (a zone
    id that starts with 25 is read as RFC 6874's: write ``%2525`` for it)."""
    address, percent, zone = literal.partition("%")
    if zone.startswith("25"):
        zone = unquote(zone[2:])
    try:
        address = str(ipaddress.IPv6Address(address))
    except ValueError as exc:
        raise ConfigError(f"store URI {uri!r} is not a valid URL: {exc}") from exc
    if not percent:
        return address
    if not _ZONE.fullmatch(zone):
        raise ConfigError(
            f"store URI {uri!r} is not a valid URL: the IPv6 zone id {zone!r} is not an "
            "interface name or number (write it as [fe80::1%25eth0])"
        )
    return f"{address}%{zone}"


def _probe(uri: str, server: _Server, path: str, headers: dict[str, str]) -> None:
    """StoreUnavailableError when the server accepts no request within PROBE_SECONDS; any
    answer (an error status included) or a refused connection is left to the client."""
    import httpx

    try:
        httpx.get(server.url(path), headers=headers, timeout=PROBE_SECONDS)
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
    from rechunk.adapters.chroma import ChromaStore, check_collection_name, http_client

    check_collection_name(collection)  # before a folder or a client is made
    if uri.startswith(("chroma+http://", "chroma+https://")):
        ssl = uri.startswith("chroma+https://")
        server = _server(uri, required_port=not ssl, secrets=_CHROMA_SECRETS, query=_CHROMA_QUERY)
        tenant, database = chroma_names(server.query.get("tenant"), server.query.get("database"))
        _probe(uri, server, server.path + "/api/v2/heartbeat", {})
        port = server.port or _DEFAULT_PORTS["chroma+https"]
        client = http_client(server.host, port, ssl=ssl, path=unquote(server.path),
                             tenant=tenant, database=database)  # fmt: skip
    else:
        client = chromadb.PersistentClient(path=_folder(uri, create))
    return OpenStore(uri, "chroma", ChromaStore(client, collection, layout=layout), client)


def _edge(uri: str, collection: str, layout: Layout, create: bool) -> OpenStore:
    require("qdrant_edge", "edge", "qdrant-edge-py")
    from rechunk.adapters.qdrant_edge import QdrantEdgeStore, check_collection_name, edge_client

    check_collection_name(collection)  # before a folder or a client is made
    client = edge_client(_folder(uri, create), create=create)
    store = QdrantEdgeStore(client, collection, layout=layout)
    return OpenStore(uri, "qdrant-edge", store, client)


def open_store(
    uri: str, collection: str, layout: str = "langchain", *, create: bool = True
) -> OpenStore:
    """Open the store a URI names (see the module docstring for the forms).

    With ``create=False`` an embedded store folder that holds no store yet is a
    :class:`StoreError` and nothing is written (read-only commands).
    """
    checked = check_layout(cast(Layout, layout))
    if uri.startswith("qdrant-edge:"):
        return _edge(uri, collection, checked, create)
    if uri.startswith("qdrant"):
        if uri.startswith(("qdrant:", "qdrant+http://", "qdrant+https://")):
            return _qdrant(uri, collection, checked, create)
    elif uri.startswith(("chroma:", "chroma+http://", "chroma+https://")):
        return _chroma(uri, collection, checked, create)
    raise ConfigError(f"unknown store URI {uri!r}; use one of: {', '.join(SCHEMES)}")
