"""A real OpenAI-compatible embeddings server for tests: ``infinity-emb`` in its own venv.

infinity-emb pins libraries rechunk's environment cannot hold (transformers 4.x,
numpy 1.x), so it lives in a virtualenv of its own, made once with pip from the
package registry and kept across runs under ``$RECHUNK_TEST_CACHE`` (default
``~/.cache/rechunk/test``): the first run takes minutes, later ones none.
``python tests/infinity_server.py`` makes it ahead of time.

``running_infinity(model_folder)`` starts ``infinity_emb v2`` on 127.0.0.1 with the
packaged MiniLM served as ``minilm`` (torch engine, CPU, offline), waits until
``/models`` answers, yields an :class:`InfinityServer` and stops the process by
its pid on the way out.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from chroma_server import HOST, free_port, stop_process  # noqa: E402

VERSION = "0.0.78"
#: What the venv holds: the server, its torch engine, and the CPU torch rechunk uses too
REQUIREMENTS = (
    f"infinity-emb[server,torch]=={VERSION}",
    "transformers>=4.47,<5",
    "sentence-transformers>=3.0.1,<4",
)
TORCH = "torch==2.13.0"
SERVED_NAME = "minilm"


def cache_root() -> Path:
    root = os.environ.get("RECHUNK_TEST_CACHE")
    return Path(root) if root else Path.home() / ".cache" / "rechunk" / "test"


def venv_dir() -> Path:
    return cache_root() / f"infinity-emb-{VERSION}"


def _run(args: list[str], log: Path, timeout: float) -> None:
    with log.open("ab") as out:
        out.write(f"$ {' '.join(args)}\n".encode())
        out.flush()
        subprocess.run(
            args, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            check=True, timeout=timeout,
        )  # fmt: skip


def ensure_venv(timeout: float = 1200.0) -> Path:
    """The ``infinity_emb`` executable, installing the venv first if it is not complete.

    Raises ``RuntimeError`` (with the tail of the install log) when pip cannot
    install it: no registry, no wheel for this platform.
    """
    venv = venv_dir()
    exe = venv / "bin" / "infinity_emb"
    marker = venv / ".rechunk-complete"
    if marker.is_file() and exe.is_file():
        return exe
    venv.parent.mkdir(parents=True, exist_ok=True)
    log = venv.parent / f"infinity-emb-{VERSION}-install.log"
    try:
        if not (venv / "bin" / "python").is_file():
            _run([sys.executable, "-m", "venv", str(venv)], log, 300)
        pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q"]
        _run([*pip, "--upgrade", "pip"], log, 600)
        _run([*pip, TORCH], log, timeout)  # CPU torch first, as rechunk's own install does
        _run([*pip, *REQUIREMENTS], log, timeout)
        _run([str(venv / "bin" / "python"), "-c", "import infinity_emb, torch"], log, 300)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError) as exc:
        tail = log.read_text(encoding="utf-8", errors="replace")[-1500:] if log.exists() else ""
        raise RuntimeError(
            f"cannot install infinity-emb {VERSION} into {venv}: {exc}\n{tail}"
        ) from exc
    marker.write_text("ok\n", encoding="utf-8")
    return exe


@dataclass
class InfinityServer:
    """A running infinity server: ``base_url`` serves ``POST /embeddings``."""

    process: subprocess.Popen[bytes]
    port: int
    log: Path

    @property
    def base_url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def stop(self) -> None:
        stop_process(self.process)


@contextlib.contextmanager
def running_infinity(
    model_folder: Path, log_dir: Path, *, timeout: float = 180.0
) -> Iterator[InfinityServer]:
    """Serve ``model_folder`` as ``minilm`` on a free port for the duration of the block."""
    exe = ensure_venv()
    port = free_port()
    log = log_dir / f"infinity-{port}.log"
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "INFINITY_ANONYMOUS_USAGE_STATS": "0",
        "DO_NOT_TRACK": "1",
        "HF_HOME": str(log_dir / "hf-home"),
    }
    env.pop("VIRTUAL_ENV", None)
    with log.open("wb") as out:
        process = subprocess.Popen(
            [str(exe), "v2", "--model-id", str(model_folder), "--served-model-name", SERVED_NAME,
             "--engine", "torch", "--device", "cpu", "--no-bettertransformer",
             "--host", HOST, "--port", str(port)],
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + timeout
        while True:
            if process.poll() is not None:
                tail = log.read_text(encoding="utf-8", errors="replace")[-2000:]
                raise RuntimeError(f"infinity_emb exited with {process.returncode}:\n{tail}")
            try:
                with urllib.request.urlopen(f"http://{HOST}:{port}/models", timeout=2) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                tail = log.read_text(encoding="utf-8", errors="replace")[-2000:]
                raise TimeoutError(f"infinity on port {port} did not start in {timeout} s:\n{tail}")
            time.sleep(0.25)
        yield InfinityServer(process, port, log)
    finally:
        stop_process(process)


if __name__ == "__main__":
    print(ensure_venv())
