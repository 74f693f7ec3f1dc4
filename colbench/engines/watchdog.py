"""Run a command, and take its process group down when the process that started this one dies, however it dies.

    python watchdog.py GRACE_S COMMAND...

Started by `VLLMServer.start` as the leader of the server's own process group, with a pipe on stdin whose only writer
is the starting process: end of file there means that process is gone (kill -9 included: the kernel closes its
descriptors). The group then gets SIGTERM (vLLM shuts its engine down), and SIGKILL once GRACE_S seconds have passed.

Why not the kernel's parent-death signal (PR_SET_PDEATHSIG) on the server itself: vLLM loses a SIGTERM that lands
while its engine starts (measured: a command killed 12 s into its server's start left the server and its engine
running, in 3 of 5 tries), and its engine process outlives a SIGKILL of its API server. Here SIGKILL follows anyway,
and reaches every process of the group.

A plain script, run by path: importing colbench would cost the server's start a second.
"""
import os
import signal
import subprocess
import sys
import threading


def main() -> int:
    grace_s, command = float(sys.argv[1]), sys.argv[2:]
    if os.getpgrp() != os.getpid():  # the signals below go to this process's group: never to its starter's
        os.setpgid(0, 0)
    # Ignored here, delivered to the rest of the group: `VLLMServer.stop` and the watch below signal the whole group,
    # and this process must outlive the server to report its exit status (and to send SIGKILL after the grace).
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    server = subprocess.Popen(command, stdin=subprocess.DEVNULL)

    def take_the_group_down_when_the_starter_dies() -> None:
        while os.read(0, 4096):  # nothing is ever written: it returns b"" at end of file
            pass
        os.killpg(0, signal.SIGTERM)
        try:
            server.wait(grace_s)
        except subprocess.TimeoutExpired:
            pass
        os.killpg(0, signal.SIGKILL)  # this process too: nobody is left to read its status

    threading.Thread(target=take_the_group_down_when_the_starter_dies, daemon=True).start()
    code = server.wait()
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main())
