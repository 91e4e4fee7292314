"""Start a real Ray cluster of several nodes on 127.0.0.1 for tests and benchmarks.

Ray turns a loopback ``--node-ip-address`` into the machine's routable address (its nodes
are meant to reach each other across machines). Ray's own switch for single-machine
clusters, ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``, keeps every address on 127.0.0.1, and
a second node joins through ``ray start`` with Ray's localhost rewrite turned off (under
that switch Ray refuses a second node otherwise). ``running_ray(nodes)`` starts the head
and ``nodes - 1`` more nodes (one CPU each, a small object store, no dashboard, no usage
statistics), joins this process to it, and ends the cluster's own processes on the way
out, also after a failure: those whose command line names the cluster's temp dir, and
their descendants (its workers). Not ``ray stop``, which ends every Ray process of this
user on the machine: another test's cluster, a benchmark's.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from chroma_server import free_port  # noqa: E402

#: ``RAY_AUTH_MODE`` set: Ray 2.60 turns token authentication on for a head that finds
#: ``~/.ray/auth_token`` (any local ``ray.init()`` of this user writes one) but not for a
#: node that joins it, which the head then refuses ("InvalidAuthToken")
ENV = {
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
    "RAY_AUTH_MODE": "disabled",
}
#: the head finds a dead node in about 2 s, not Ray's default 15-30 s (the tests kill one)
HEAD_ENV = {
    "RAY_health_check_initial_delay_ms": "1000",
    "RAY_health_check_period_ms": "1000",
    "RAY_health_check_timeout_ms": "1000",
    "RAY_health_check_failure_threshold": "2",
}
RAY = Path(sys.executable).parent / "ray"
#: `ray start` for a further node on this machine, with Ray's localhost rewrite off
MORE_NODES = (
    "import ray._private.ray_constants as c, ray._private.services as s\n"
    "c.ENABLE_RAY_CLUSTER = True\n"
    "s.resolve_ip_for_localhost = lambda host: host\n"
    "from ray.scripts.scripts import main\n"
    "main()\n"
)


def _ray_cli(args: list[str], env: dict[str, str], timeout: float = 90) -> None:
    done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(
            f"{' '.join(args[:3])} failed:\n{done.stdout[-1500:]}{done.stderr[-1500:]}"
        )


def add_node(address: str, env: dict[str, str] | None = None, cpus: int = 1) -> None:
    """Start one more node of the cluster at ``address`` on 127.0.0.1."""
    env = {**os.environ, **ENV, **(env or {})}
    _ray_cli(
        [sys.executable, "-c", MORE_NODES, "start", f"--address={address}",
         "--node-ip-address=127.0.0.1", f"--num-cpus={cpus}",
         "--object-store-memory=150000000", "--disable-usage-stats"],
        env,
    )  # fmt: skip


def _processes() -> dict[int, tuple[int, bytes]]:
    """pid -> (parent pid, command line) of every process (Linux /proc)."""
    found: dict[int, tuple[int, bytes]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        found[int(entry.name)] = (parent, cmdline)
    return found


def _ours(temp: str, address: str) -> set[int]:
    """The processes of the cluster whose temp dir is ``temp`` and whose head is at
    ``address``: the ones that name either (GCS, raylets, agents; the Ray client server,
    which names only the head's address and outlives ``ray start``, its parent) and
    everything they started (workers, actors)."""
    table = _processes()
    names = (temp.encode(), f"--address={address}".encode())
    ours = {pid for pid, (_, cmdline) in table.items() if any(n in cmdline for n in names)}
    ours.discard(os.getpid())
    grew = True
    while grew:
        more = {pid for pid, (parent, _) in table.items() if parent in ours} - ours
        more.discard(os.getpid())
        ours |= more
        grew = bool(more)
    return ours


def stop_cluster(temp: str, address: str, env: dict[str, str]) -> None:
    """End the processes of the cluster in ``temp`` at ``address`` (SIGTERM, then SIGKILL
    after 2 s: its GCS server outlives a SIGTERM by more than 8 s); without /proc, ``ray
    stop --force`` (which ends every cluster of this user)."""
    if not Path("/proc/self").is_dir():
        subprocess.run([str(RAY), "stop", "--force"], env=env, capture_output=True, timeout=60)
        return
    for sig, wait in ((signal.SIGTERM, 2.0), (signal.SIGKILL, 2.0)):
        pids = _ours(temp, address)
        for pid in pids:
            with contextlib.suppress(OSError):
                os.kill(pid, sig)
        deadline = time.monotonic() + wait
        while pids and time.monotonic() < deadline:
            pids = {pid for pid in pids if _running(pid)}
            time.sleep(0.1)
        if not pids:
            return


def _running(pid: int) -> bool:
    """Whether ``pid`` is a process that has not ended (a zombie has: only its parent's
    wait is missing)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@contextlib.contextmanager
def running_ray(
    nodes: int = 2, *, timeout: float = 60.0, worker_niceness: int | None = None
) -> Iterator[str]:
    """A cluster of ``nodes`` nodes on 127.0.0.1 joined by this process; its address.
    ``worker_niceness``: the nice value of its workers (Ray's default: 15, below every
    other process of the machine, the niced jobs of other users included)."""
    import ray

    os.environ.update(ENV)
    ray._private.ray_constants.ENABLE_RAY_CLUSTER = False  # this process: 127.0.0.1 too
    env = {**os.environ, **ENV}
    if worker_niceness is not None:
        env["RAY_worker_niceness"] = str(worker_niceness)
    temp = tempfile.mkdtemp(prefix="rk-ray-", dir="/tmp")  # short: Ray's socket paths
    port = free_port()
    address = f"127.0.0.1:{port}"
    try:
        _ray_cli(
            [str(RAY), "start", "--head", "--node-ip-address=127.0.0.1", f"--port={port}",
             "--include-dashboard=false", f"--temp-dir={temp}", "--num-cpus=1",
             "--object-store-memory=150000000", "--disable-usage-stats"],
            {**env, **HEAD_ENV},
        )  # fmt: skip
        for _ in range(nodes - 1):
            add_node(address, env)
        from rechunk.integrations.ray import connect

        connect(address)
        deadline = time.monotonic() + timeout
        while len([n for n in ray.nodes() if n["Alive"]]) < nodes:
            if time.monotonic() > deadline:
                raise TimeoutError(f"the Ray cluster did not reach {nodes} nodes in {timeout} s")
            time.sleep(0.5)
        yield address
    finally:
        ray.shutdown()
        stop_cluster(temp, address, env)
        shutil.rmtree(temp, ignore_errors=True)
