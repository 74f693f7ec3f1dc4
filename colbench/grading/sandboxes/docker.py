"""Docker: one container per worker slot, running the same fork-server.

Untested on the machines this was written on (no engine there); its tests skip when no
engine answers. The `docker` SDK is imported only when this backend is asked for.
"""
from __future__ import annotations

import os
import select
import struct

from .base import server_source

IMAGE = os.environ.get("COLBENCH_GRADING_IMAGE", "python:3.11-slim")
PING_TIMEOUT_S = 2.0


def _client(timeout: float = 30.0):
    import docker  # lazy: the SDK is only needed when this backend is used

    return docker.from_env(timeout=timeout)


class DockerChannel:
    """The container's stdin and stdout over the attach socket.

    Without a tty, Docker frames its output: 8 bytes (stream, 0, 0, 0, length) then
    the payload. We unwrap stdout frames and ignore anything else.
    """

    def __init__(self, container, socket):
        self.container = container
        self._raw = getattr(socket, "_sock", socket)
        self._socket = socket
        self._frames = b""

    def send(self, data: bytes) -> None:
        self._raw.sendall(data)

    def receive(self, timeout: float) -> bytes:
        while True:
            payload = self._unframe()
            if payload:
                return payload
            ready, _, _ = select.select([self._raw], [], [], max(timeout, 0))
            if not ready:
                raise TimeoutError
            chunk = self._raw.recv(1 << 16)
            if not chunk:
                return b""
            self._frames += chunk

    def _unframe(self) -> bytes:
        out = b""
        while len(self._frames) >= 8:
            stream, length = self._frames[0], struct.unpack(">I", self._frames[4:8])[0]
            if len(self._frames) < 8 + length:
                break
            if stream == 1:
                out += self._frames[8 : 8 + length]
            self._frames = self._frames[8 + length :]
        return out

    def diagnostics(self) -> str:
        try:
            return self.container.logs(stdout=False, stderr=True)[-300:].decode("utf-8", "replace")
        except Exception:
            return ""

    def close(self) -> None:
        try:
            self._socket.close()
        except Exception:
            pass
        try:
            self.container.remove(force=True)
        except Exception:
            pass


class DockerBackend:
    name = "docker"

    @staticmethod
    def check() -> str | None:
        """None if a Docker engine answers a ping quickly, else why not."""
        try:
            _client(timeout=PING_TIMEOUT_S).ping()
        except ImportError:
            return "the docker SDK is not installed"
        except Exception as error:  # the SDK raises several kinds for "no engine"
            return f"no Docker engine answers ({type(error).__name__})"
        return None

    def __init__(self):
        self._docker = None

    def start(self, slot: int, memory_mb: int) -> DockerChannel:
        import docker

        if self._docker is None:
            self._docker = _client()
        options = dict(
            command=["python3", "-I", "-S", "-c", server_source(), "/tmp", "ns"],
            stdin_open=True,
            network_mode="none",
            read_only=True,
            tmpfs={"/tmp": "size=64m,mode=1777"},
            pids_limit=64,
            mem_limit=f"{memory_mb + 256}m",  # the server plus one child at its limit
            memswap_limit=f"{memory_mb + 256}m",
            user="65534:65534",
            cap_drop=["ALL"],
            security_opt=["no-new-privileges"],
            working_dir="/tmp",
            labels={"colbench.grading": str(slot)},
        )
        try:
            container = self._docker.containers.create(IMAGE, **options)
        except docker.errors.ImageNotFound:
            self._docker.images.pull(IMAGE)
            container = self._docker.containers.create(IMAGE, **options)
        socket = container.attach_socket(params={"stdin": 1, "stdout": 1, "stream": 1})
        container.start()
        return DockerChannel(container, socket)
