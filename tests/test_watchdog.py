"""engines/watchdog.py, which runs every server a command starts for itself (`--engine vllm-serve`): real processes,
no vLLM. A vLLM server can lose the SIGTERM its starter's death sends it (one that lands while its engine starts), so
the stand-in here ignores SIGTERM outright, and so does the child it starts (vLLM's engine outlives its API server)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from colbench.engines.vllm_server import WATCHDOG

# Ignores SIGTERM, starts a child that ignores it too, says the child's pid, then waits for ever.
STUBBORN = """
import os, signal, subprocess, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
ignore = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"
child = subprocess.Popen([sys.executable, "-c", ignore])
print(child.pid, flush=True)
time.sleep(600)
"""

# Starts the watchdog as VLLMServer.start does (its own group, a pipe on stdin), says its pid, then waits for ever.
STARTER = f"""
import subprocess, sys, time
watched = subprocess.Popen([sys.executable, {str(WATCHDOG)!r}, "1", sys.executable, "-c", {STUBBORN!r}],
                           stdin=subprocess.PIPE, stdout=sys.stdout, start_new_session=True)
print(watched.pid, flush=True)
time.sleep(600)
"""


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ", 1)[1][0] != "Z"  # a zombie is gone, waiting to be reaped
    except FileNotFoundError:
        return False


def wait_until(condition, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.1)
    return condition()


def test_a_starter_killed_takes_down_a_server_that_ignores_sigterm_and_its_children():
    starter = subprocess.Popen([sys.executable, "-c", STARTER], stdout=subprocess.PIPE, text=True)
    try:
        watchdog, child = int(starter.stdout.readline()), int(starter.stdout.readline())
        group = os.getpgid(watchdog)
        assert group == watchdog and os.getpgid(child) == group  # the server's whole group, the starter outside it
        time.sleep(1)
        assert alive(watchdog) and alive(child)  # nothing goes while the starter lives
        starter.send_signal(signal.SIGKILL)
        starter.wait(10)
        # SIGTERM (ignored by all), then SIGKILL after the 1-s grace.
        assert wait_until(lambda: not alive(child) and not alive(watchdog), 15)
    finally:
        starter.kill()
        try:
            os.killpg(watchdog, signal.SIGKILL)
        except (NameError, ProcessLookupError):
            pass


def test_the_watchdog_reports_its_servers_exit_status():
    """VLLMServer.wait_ready reports a server that exits while starting by this status."""
    for program, status in (("raise SystemExit(3)", 3), ("import os, signal; os.kill(os.getpid(), signal.SIGKILL)",
                                                         128 + signal.SIGKILL)):
        # stdin stays open, as the starter keeps it: its end would take the group down.
        watched = subprocess.Popen([sys.executable, str(WATCHDOG), "1", sys.executable, "-c", program],
                                   stdin=subprocess.PIPE)
        try:
            assert watched.wait(30) == status
        finally:
            watched.stdin.close()
