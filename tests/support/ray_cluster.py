"""A real local Ray cluster: ``ray start --head`` on this machine, advertised on 127.0.0.1, with token
authentication and its own temp directory and ports (``local_ray_cluster``); everything it started is
killed when it ends. For the Ray executor's tests and benchmark."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class RayCluster:
    address: str
    process: subprocess.Popen[bytes]

    def worker_pids(self) -> list[int]:
        """The cluster's processes running a task's flow (Ray names them after the function)."""
        return [pid for pid in _descendants(self.process.pid) if b"ray::_run_on_node" in _cmdline(pid)]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def _descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, []))
    return found[1:]


@contextmanager
def local_ray_cluster(num_cpus: int = 2) -> Iterator[RayCluster]:
    # Ray's unix sockets live below the temp directory: a short path keeps them under the 107-byte limit.
    temp = Path(tempfile.mkdtemp(prefix="ar-", dir="/tmp"))
    port = free_port()
    # The head and every driver must share one token (RAY_AUTH_TOKEN, read by Ray when it is imported).
    if "RAY_AUTH_TOKEN" not in os.environ:
        raise RuntimeError("set RAY_AUTH_MODE=token and RAY_AUTH_TOKEN before Ray is imported")
    ray = str(Path(sys.executable).with_name("ray"))
    command = [
        ray,
        "start",
        "--head",
        "--block",
        f"--port={port}",
        f"--num-cpus={num_cpus}",
        "--node-ip-address=127.0.0.1",
        "--include-dashboard=false",
        f"--dashboard-port={free_port()}",
        f"--ray-client-server-port={free_port()}",
        "--disable-usage-stats",
        f"--temp-dir={temp}",
    ]
    log = (temp / "start.log").open("wb")
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while "Ray runtime started" not in (temp / "start.log").read_text(errors="replace"):
            if process.poll() is not None or time.monotonic() > deadline:
                output = (temp / "start.log").read_text(errors="replace")[-3000:]
                raise RuntimeError(f"ray start failed:\n{output}")
            time.sleep(0.2)
        yield RayCluster(f"127.0.0.1:{port}", process)
    finally:
        doomed = _descendants(process.pid)
        for pid in [process.pid, *doomed]:
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        process.wait(timeout=30)
        log.close()
        shutil.rmtree(temp, ignore_errors=True)
