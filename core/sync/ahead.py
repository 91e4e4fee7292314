"""Chunking a sync's next batch of documents in a helper process while this one publishes.

Chunking is Python work (2-3 ms for a 4 KB document), and so is writing to an embedded
store: embedded Qdrant is Python, and embedded Chroma holds the interpreter lock while it
writes. A thread could not overlap the two; a second process can, on a second core. A
sync of more than one batch therefore hands the documents of batch i+1 that need
chunking to one helper process (:func:`main`, started by the sync and ended with it)
while it embeds and publishes batch i.

Only rechunk's own chunkers are sent (pickled once, with their tokenizer), and the helper
answers with the policy id of the chunker it holds, which must be the sync's: the chunks
are the ones the sync would have made. Whatever goes wrong on the helper's side (it
cannot start, dies, raises, answers out of turn) makes the sync chunk those documents
itself and stop using the helper, so a failure there changes the time a sync takes,
never what it writes; an error of the chunker itself is raised by the sync's own call.
"""

from __future__ import annotations

import contextlib
import logging
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from rechunk.chunkers.base import BaseChunker
from rechunk.chunking.chunk import Chunk, Chunker

__all__ = ["MIN_DOCUMENTS", "ChunkAhead", "cores"]

log = logging.getLogger("rechunk.sync")

#: the fewest documents worth a request to the helper (fewer are chunked in process)
MIN_DOCUMENTS = 16
#: seconds the helper gets to exit once its input is closed, before it is killed
_EXIT_WAIT = 5.0


def cores() -> int:
    """CPU cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


class ChunkAhead:
    """One helper process that chunks texts with a copy of ``chunker``, one request at a
    time: :meth:`submit` a batch's texts, do other work, :meth:`collect` their chunks."""

    def __init__(self, chunker: Chunker) -> None:
        self._chunker = chunker
        self._policy = chunker.policy_id
        self._proc: subprocess.Popen[bytes] | None = None
        self._folder: Path | None = None  # the requests, as files (see _start)
        self._sent = 0
        self._asked: int | None = None  # texts of the request in flight
        # a chunker of the caller's own may hold state or not survive a copy
        own = isinstance(chunker, BaseChunker) and type(chunker).__module__.startswith("rechunk.")
        self._off = not own or cores() < 2

    @property
    def process(self) -> subprocess.Popen[bytes] | None:
        """The helper process, once started."""
        return self._proc

    def submit(self, texts: Sequence[str]) -> bool:
        """Hand ``texts`` to the helper; False when it will not chunk them (the caller does)."""
        if self._off or len(texts) < MIN_DOCUMENTS:
            return False
        if self._asked is not None:
            raise RuntimeError("collect the chunks of the request in flight first")
        try:
            proc = self._proc or self._start()
            assert self._folder is not None and proc.stdin is not None
            self._sent += 1
            request = self._folder / f"request-{self._sent}.pickle"
            request.write_bytes(pickle.dumps(list(texts), protocol=pickle.HIGHEST_PROTOCOL))
            proc.stdin.write(os.fsencode(request) + b"\n")
            proc.stdin.flush()
        except Exception as exc:  # any failure: the caller chunks them
            self._give_up(f"could not send it {len(texts)} documents ({exc!r})")
            return False
        self._asked = len(texts)
        return True

    def collect(self) -> list[list[Chunk]] | None:
        """The chunks of the texts last submitted, in order; None when the helper failed
        (the caller chunks them, and the helper is not asked again)."""
        asked = self._asked
        if asked is None or self._proc is None or self._proc.stdout is None:
            raise RuntimeError("no request in flight")
        try:
            status, policy, result = pickle.load(self._proc.stdout)
        except Exception as exc:  # died, or wrote what is not an answer
            self._give_up(f"gave no answer ({exc!r}; exit code {self._proc.poll()})")
            return None
        self._asked = None
        if status != "ok":
            self._give_up(f"could not chunk them ({result})")
            return None
        if policy != self._policy or len(result) != asked:
            self._give_up(f"answered with policy {policy} for {len(result)} of {asked} texts")
            return None
        return [[Chunk(*fields) for fields in chunks] for chunks in result]

    def close(self) -> None:
        """End the helper: its input closed, it exits; killed if it does not, or at once
        while it chunks what nobody will collect (a sync that raised)."""
        proc, self._proc, self._off = self._proc, None, True
        if proc is not None:
            if self._asked is not None:
                proc.kill()
                self._asked = None
            for stream in (proc.stdin, proc.stdout):
                if stream is not None:
                    stream.close()
            try:
                proc.wait(_EXIT_WAIT)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)
            self._folder = None

    def _start(self) -> subprocess.Popen[bytes]:
        # The chunker and each request go through files in a private folder, and only
        # their paths through the pipe: a pipe holds 64 KiB, and a request of a few MB
        # written into it would wait for the helper to read it (at first, while it starts).
        self._folder = Path(tempfile.mkdtemp(prefix="rechunk-ahead-"))
        chunker = self._folder / "chunker.pickle"
        chunker.write_bytes(pickle.dumps(self._chunker, protocol=pickle.HIGHEST_PROTOCOL))
        env = dict(os.environ)
        # the helper imports rechunk from where this process did
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
        self._proc = subprocess.Popen(
            [sys.executable, "-c", "from rechunk.sync.ahead import main; main()", chunker],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            start_new_session=True,  # a Ctrl-C reaches the sync, which ends the helper
        )
        log.debug("chunking ahead in helper process %d", self._proc.pid)
        return self._proc

    def _give_up(self, why: str) -> None:
        log.warning("chunking helper %s; chunking in this process", why)
        self.close()


def serve(chunker_file: Path, requests: IO[bytes], answers: IO[bytes]) -> None:
    """The helper's loop: the pickled chunker from ``chunker_file``, then one line per
    request until the input closes: the path of a pickled list of texts (read, then
    removed). For each, ``("ok", policy_id, [[(start, end, text, tokens), ...], ...])``
    or ``("error", policy_id, the exception's type name)``."""
    chunker: Any = pickle.loads(chunker_file.read_bytes())
    policy = chunker.policy_id
    for line in requests:
        request = Path(os.fsdecode(line.rstrip(b"\n")))
        try:
            texts = pickle.loads(request.read_bytes())
            request.unlink()
            result = [[(c.start, c.end, c.text, c.tokens) for c in chunker.chunk(t)] for t in texts]
            answer: tuple[str, str, Any] = ("ok", policy, result)
        except Exception as exc:  # the sync raises it from its own call
            answer = ("error", policy, type(exc).__name__)  # a message might quote text
        pickle.dump(answer, answers, protocol=pickle.HIGHEST_PROTOCOL)
        answers.flush()


def main() -> None:
    """The helper process: ``python -c "from rechunk.sync.ahead import main; main()" CHUNKER``."""
    answers = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # what a library prints must not land among the answers
    with contextlib.suppress(BrokenPipeError):  # the sync ended without reading an answer
        serve(Path(sys.argv[1]), sys.stdin.buffer, answers)
