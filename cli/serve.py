"""`colbench serve`: start a vLLM server of a policy on this machine and say how to use it."""
from __future__ import annotations

import time

import typer

from colbench.cli.common import console, fail, print_json, state
from colbench.cli.options import flags_from
from colbench.serve import ServeConfig


@flags_from(ServeConfig)
def serve(config: ServeConfig, as_json: bool = typer.Option(False, "--json", help=(
        "Print where it serves as JSON once it is ready (base_url, model, pid, log)."))) -> None:
    """Serve a policy with vLLM (the CPU build on a CPU, upstream vLLM on a GPU) for --engine openai.

    Prints the --base-url (and --served-model) to give rollout, policy fit --engine openai and SWEET's --sampler openai
    once the server answers, then serves until Ctrl-C or SIGTERM (with --detach: returns, the server left running).
    Every setting is a ServeConfig field (colbench/serve.py); why each vLLM flag is set:
    colbench/engines/vllm_server.py.
    """
    from colbench.engines.vllm_server import VLLMServer, failure_cause, find_vllm, request_name
    from colbench.model_refs import checkpoint_lookup, checkpoint_part
    from colbench.serve import server_spec

    install = find_vllm(config.vllm_python)
    lookup = checkpoint_lookup(state.db()) if checkpoint_part(config.model) is not None else None
    spec = server_spec(config, lookup)
    server = VLLMServer(spec, install, log=config.log)
    name = request_name(spec)
    server.start(detach=config.detach)
    try:
        ready_s = server.wait_ready(config.startup_timeout_s)
        where = {"base_url": server.base_url, "served_model": name, "model": config.model, "pid": server.process.pid,
                 "log": str(server.log), "vllm": install.describe(), "ready_s": round(ready_s, 1)}
        if as_json:
            print_json(where)
        else:
            console.print(
                f"{install.describe()} serves {config.model} as {name!r}, ready in {ready_s:.0f} s (log: {server.log})"
                f"\nuse: --engine openai --base-url {server.base_url} --served-model {name} --model {config.model}",
                highlight=False, soft_wrap=True)
            console.print(f"stop it with: kill -- -{server.process.pid}" if config.detach else "Ctrl-C stops it",
                          highlight=False)
        if config.detach:
            return
        # Serve until Ctrl-C (or the SIGTERM the CLI turns into one), or until the server dies.
        while server.process.poll() is None:
            time.sleep(0.5)
        fail(f"the vLLM server exited ({server.process.returncode}): {failure_cause(server.log)} (log: {server.log})")
    finally:
        if not config.detach:
            server.stop()


def register(app: typer.Typer) -> None:
    app.command("serve")(serve)
