"""Start a real Chroma server (``chroma run``, shipped in the chromadb wheel) for tests.

``running_chroma(path)`` starts ``chroma run --path PATH --host 127.0.0.1 --port
FREE_PORT`` from the interpreter's own bin folder, waits until
``HttpClient(...).heartbeat()`` answers (30 s at most), yields a
:class:`ChromaServer` with a connected client, and stops the server by its pid
(terminate, then kill) on the way out.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from chromadb.api import ClientAPI

HOST = "127.0.0.1"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        port: int = sock.getsockname()[1]
        return port


def chroma_cli() -> Path:
    """The ``chroma`` executable beside this interpreter (the venv's bin folder)."""
    folder = Path(sys.executable).parent
    for name in ("chroma", "chroma.exe"):
        if (folder / name).exists():
            return folder / name
    raise FileNotFoundError(f"no chroma executable in {folder}; pip install chromadb")


def make_client(port: int) -> ClientAPI:
    """An HttpClient to 127.0.0.1:port with telemetry off (raises while nothing answers)."""
    import chromadb
    from chromadb.config import Settings

    return chromadb.HttpClient(host=HOST, port=port, settings=Settings(anonymized_telemetry=False))


@dataclass
class ChromaServer:
    """A running ``chroma run`` process and a client connected to it."""

    process: subprocess.Popen[bytes]
    port: int
    path: Path
    log: Path
    client: ClientAPI

    def stop(self) -> None:
        """Terminate the server (kill it after 10 s); safe to call twice."""
        stop_process(self.process)


def stop_process(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=10)


def _tail(log: Path) -> str:
    try:
        return log.read_text(encoding="utf-8", errors="replace")[-2000:]
    except OSError:
        return ""


@contextlib.contextmanager
def running_chroma(path: Path, *, timeout: float = 30.0) -> Iterator[ChromaServer]:
    """Run a Chroma server persisting into ``path`` for the duration of the block."""
    path.mkdir(parents=True, exist_ok=True)
    port = free_port()
    log = path.parent / f"{path.name}-chroma.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [os.fspath(chroma_cli()), "run", "--path", os.fspath(path), "--host", HOST,
             "--port", str(port)],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + timeout
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"chroma run exited with {process.returncode}:\n{_tail(log)}")
            try:
                client = make_client(port)
                client.heartbeat()
                break
            except Exception as exc:
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        f"chroma server on port {port} did not answer within {timeout} s "
                        f"({exc}):\n{_tail(log)}"
                    ) from exc
                time.sleep(0.1)
        yield ChromaServer(process, port, path, log, client)
    finally:
        stop_process(process)
