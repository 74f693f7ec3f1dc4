"""A real vLLM server for the session, started by `colbench serve --detach` itself on the embedded SmolLM2.

It serves a copy of the embedded model (its weights linked, not copied) whose generation_config.json asks for
top_p 0.9, top_k 50, min_p 0.1 and repetition_penalty 1.3, as many real models' do: a test that finds every
filter off in what vLLM applied shows that colbench's server and requests switched them off. Started at the first
test that asks for it (~30-60 s), stopped at the session's end.

Where vLLM cannot run (no .venv-vllm: `make test` builds it) the tests that need it skip with the reason, except
under CI (CI=true), where they fail: `make test` installs it, so a missing one there is a broken set-up.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

FILTERING_GENERATION_CONFIG = {"bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 2, "top_p": 0.9, "top_k": 50,
                               "min_p": 0.1, "repetition_penalty": 1.3, "temperature": 0.6}
SERVED_NAME = "smollm2"


@dataclass
class RealServer:
    base_url: str
    served_model: str
    log: Path
    pid: int
    python: str  # the interpreter holding vLLM

    def log_size(self) -> int:
        return self.log.stat().st_size

    def applied_since(self, offset: int) -> list[str]:
        """The SamplingParams vLLM printed for each request received after ``offset`` bytes of its log."""
        with open(self.log, errors="replace") as log:
            log.seek(offset)
            text = log.read()
        return [line.split("params: ", 1)[1] for line in text.splitlines() if "Received request" in line
                and "params: " in line]

    def log_since(self, offset: int) -> str:
        with open(self.log, errors="replace") as log:
            log.seek(offset)
            return log.read()


def _unavailable(reason: str):
    if os.environ.get("CI"):
        pytest.fail(f"vLLM is required under CI: {reason}")
    pytest.skip(f"vLLM not available: {reason}")


@pytest.fixture(scope="session")
def vllm_install():
    from colbench.engines.base import EngineError
    from colbench.engines.vllm_server import find_vllm

    try:
        return find_vllm()
    except EngineError as err:
        _unavailable(str(err))


@pytest.fixture(scope="session")
def vllm_server(vllm_install):
    from colbench.engines.vllm_server import free_port
    from colbench.model_cache import embedded_model_dir

    folder = Path(tempfile.mkdtemp(prefix="colbench-vllm-model-"))
    for item in Path(embedded_model_dir()).iterdir():
        if item.name != "generation_config.json":
            (folder / item.name).symlink_to(item)
    (folder / "generation_config.json").write_text(json.dumps(FILTERING_GENERATION_CONFIG))
    log = folder / "server.log"
    env = dict(os.environ, NO_COLOR="1")
    env.pop("COLBENCH_DEBUG", None)
    done = subprocess.run(
        [sys.executable, "-m", "colbench.cli.app", "serve", "--model", str(folder), "--served-name", SERVED_NAME,
         "--port", str(free_port()), "--log-requests", "--log", str(log), "--detach", "--json",
         "--vllm-python", vllm_install.python], capture_output=True, text=True, env=env, timeout=700)
    if done.returncode != 0:
        pytest.fail(f"colbench serve failed: {done.stderr.strip()}")
    where = json.loads(done.stdout)
    server = RealServer(where["base_url"], where["served_model"], log, where["pid"], vllm_install.python)
    yield server
    for sig in (signal.SIGTERM, signal.SIGKILL):  # not this process's child: wait for its group to be gone
        try:
            os.killpg(server.pid, sig)
        except ProcessLookupError:
            return
        for _ in range(60):
            try:
                os.killpg(server.pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.5)
