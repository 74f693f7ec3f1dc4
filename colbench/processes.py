"""Host processes: who is working (worker ids) and whether a worker is still alive.

A worker id is ``host:pid:start:tag``. ``start`` (the process's start time, clock ticks
since boot) tells a reused pid apart from the worker that once had it; ``tag`` tells
apart two workers of one process. On the same host a worker is alive while a process
with that pid and start time exists and is not a zombie; on another host only its
heartbeat can tell (the callers' stale-after setting).
"""
from __future__ import annotations

import os
import socket
import uuid
from datetime import datetime, timezone


def _stat_field(pid: int, index: int) -> str | None:
    """Field `index` of /proc/<pid>/stat counted after the command name (0: the state); None
    if there is no such process."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[index]
    except (OSError, IndexError):
        return None


def process_state(pid: int) -> str | None:
    """R, S, D, T, Z... of host process `pid`; None if there is none."""
    return _stat_field(pid, 0)


def start_time(pid: int) -> str | None:
    """When host process `pid` started (clock ticks since boot): tells a reused pid apart."""
    return _stat_field(pid, 19)


def worker_id() -> str:
    """This process's id as a worker: host:pid:start:tag."""
    pid = os.getpid()
    return f"{socket.gethostname()}:{pid}:{start_time(pid) or 0}:{uuid.uuid4().hex[:6]}"


def worker_gone(worker: str | None) -> bool | None:
    """True when `worker` ran on this host and its process is gone (exited, killed, a
    zombie, or its pid reused by another process); False when it is alive here; None
    when this host cannot tell (another host, or no id)."""
    parts = (worker or "").split(":")
    if len(parts) < 3 or parts[0] != socket.gethostname() or not parts[1].isdigit():
        return None
    pid = int(parts[1])
    state = process_state(pid)
    if state is None or state in ("Z", "X"):
        return True
    if len(parts) == 4 and parts[2].isdigit() and parts[2] != "0":
        return start_time(pid) != parts[2]
    return False  # an id without a start time: the pid is all there is


def worker_abandoned(worker: str | None, last_beat: datetime | None, stale_after_s: float) -> bool:
    """Has `worker` left its work: its process on this host is gone, or, when this host
    cannot tell, its last heartbeat is older than `stale_after_s` (or there is none)?"""
    gone = worker_gone(worker)
    if gone is not None:
        return gone
    if last_beat is None:
        return True
    if last_beat.tzinfo is None:  # SQLite hands back naive UTC
        last_beat = last_beat.replace(tzinfo=timezone.utc)
    return (datetime.now(timezone.utc) - last_beat).total_seconds() > stale_after_s
