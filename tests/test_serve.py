"""`colbench serve` on bad input: one line on stderr naming the cause, a non-zero exit, no traceback, and nothing
left running. The first three need no vLLM; the last two start the real CPU build (plugins/vllm_server.py's
fixture: skipped where it is absent, failed under CI)."""
from __future__ import annotations

import os
import socket
import subprocess
import sys


COLBENCH = [sys.executable, "-m", "colbench.cli.app"]


def serve(*args, timeout: int = 300) -> subprocess.CompletedProcess:
    env = dict(os.environ, NO_COLOR="1")
    env.pop("COLBENCH_DEBUG", None)
    return subprocess.run(COLBENCH + ["serve", *args], capture_output=True, text=True, env=env, timeout=timeout)


def one_line_error(done: subprocess.CompletedProcess) -> str:
    assert done.returncode != 0, done.stdout
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


def test_a_missing_model_is_named():
    assert "model '/no/such/model' not found" in one_line_error(serve("--model", "/no/such/model"))


def test_a_python_without_vllm_is_named(tmp_path):
    line = one_line_error(serve("--vllm-python", "/usr/bin/python3"))
    assert "/usr/bin/python3 cannot import vLLM" in line


def test_flags_that_cannot_be_split_are_refused_before_anything_starts():
    assert "vllm_args cannot be read as flags" in one_line_error(serve("--vllm-args", "--seed '3"))


def test_a_taken_port_is_named(vllm_install, tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        line = one_line_error(serve("--port", str(port), "--vllm-python", vllm_install.python))
    assert f"port {port} on 127.0.0.1 is in use" in line


def test_the_users_own_vllm_flags_reach_vllm_and_its_refusal_is_the_line(vllm_install, tmp_path):
    """--vllm-args goes to the real server as written: a flag vLLM does not know makes it exit while starting, and
    the line quotes vLLM's own reason from its log (and the server's process group is gone)."""
    from colbench.engines.vllm_server import free_port

    port = free_port()
    log = tmp_path / "server.log"
    done = serve("--port", str(port), "--vllm-args", "--colbench-test-no-such-flag", "--log", str(log),
                 "--vllm-python", vllm_install.python)
    line = one_line_error(done)
    assert "the vLLM server exited" in line and "unrecognized arguments: --colbench-test-no-such-flag" in line
    assert "--colbench-test-no-such-flag" in log.read_text()
    with socket.socket() as probe:
        assert probe.connect_ex(("127.0.0.1", port)) != 0, "nothing may be left listening"
