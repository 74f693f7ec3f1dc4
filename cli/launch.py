"""`colbench launch`: a training command in several processes, through `accelerate launch`.

It picks the launcher's flags (one process per GPU, or CPU processes over gloo: accelerate's
own `--cpu --num_processes N` runs a single process) and owns Ctrl-C. The launcher runs in
a session of its own, so a terminal's Ctrl-C reaches only this process, which stops the
trainers with SIGTERM (each marks its run failed and exits 130), waits for them, and says
so in one line instead of the launcher's traceback. A trainer that fails says why in one line
(`error: ...`); the same line from the other processes and the launcher's report that follows
are not relayed. A trainer that dies without a word (kill -9, the kernel's OOM killer) gets one
line made from the launcher's report. COLBENCH_DEBUG=1 relays everything.
"""
from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import typer

from colbench.cli.common import ERROR, INTERRUPTED, fail, state

TRAINING_COMMANDS = (("critic", "fit"), ("policy", "fit"))
LAUNCHER_LOG = re.compile(r"[IWE]\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ ")  # torch elastic's own log lines
LAUNCHER_REPORT = "Traceback (most recent call last):"  # the launcher raising ChildFailedError: its report follows
# A trainer's collective failing because another trainer died (gloo: "Connection closed by peer"): an effect, not the
# cause, so the launcher's report of the dead process wins over it, whichever reaches the pipe first.
PEER_LOST = re.compile(r"connection (closed|reset) by peer|remote worker crash", re.IGNORECASE)


def register(app: typer.Typer) -> None:
    app.command("launch", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})(launch)


def launch(
    ctx: typer.Context,
    processes: int = typer.Option(2, "--processes", "-n", min=2,
                                  help="Processes to train in: one per GPU on a GPU machine, else CPU processes."),
) -> None:
    """Run `critic fit` or `policy fit` in several processes, e.g. `colbench launch -n 2 critic fit --model smollm2`.
    The figures, checkpoint and lineage are those of one run; rank 0 prints the result."""
    args = list(ctx.args)
    if tuple(args[:2]) not in TRAINING_COMMANDS:
        fail(
            "launch runs `critic fit ...` or `policy fit ...` in several processes; got "
            + (" ".join(args[:2]) or "nothing")
        )
    import torch

    if torch.cuda.is_available() and torch.cuda.device_count() < processes:
        fail(f"--processes {processes} needs {processes} GPUs; this machine has {torch.cuda.device_count()}")
    command = [
        str(Path(sys.executable).parent / "accelerate"), "launch", "--multi_gpu", "--num_processes", str(processes),
        "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
        "--main_process_port", str(_free_port()),
        "-m", "colbench.cli.app", *args,
    ]
    env = dict(os.environ)
    if state.db_url:
        env["COLBENCH_DB"] = state.db_url
    if state.artifacts:
        env["COLBENCH_ARTIFACTS"] = state.artifacts
    code, report, lost_peer = _run_owning_interrupts(command, env)
    if code == 130:
        fail(INTERRUPTED, code=130)
    if code and report:
        fail(_died(report), code=code)
    sys.stderr.writelines(lost_peer)  # no trainer said why and the launcher named none: the effect is all there is
    raise typer.Exit(code)


def _run_owning_interrupts(command: list[str], env: dict) -> tuple[int, list[str], list[str]]:
    """Run the launcher; on Ctrl-C or SIGTERM, stop its processes and return 130. Also returns the launcher's
    report of a failed process where no trainer said why (else []), and the error lines of trainers whose peer was
    lost, held back (PEER_LOST)."""
    child = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True, start_new_session=True)
    stopping, failed = threading.Event(), threading.Event()
    report: list[str] = []
    lost_peer: list[str] = []
    everything = bool(os.environ.get("COLBENCH_DEBUG"))

    def relay() -> None:  # the trainers' and launcher's stderr, until a stop or a trainer's error makes it noise
        for line in child.stderr:
            # A trainer interrupted without our Ctrl-C, or whose collective lost its peer, was stopped because
            # another died: the launcher's report says which and how.
            interrupted = line.startswith(ERROR + INTERRUPTED)  # uncoloured: the trainers write to a pipe
            peer_gone = line.startswith(ERROR) and bool(PEER_LOST.search(line))
            if everything:
                sys.stderr.write(line)
            elif report or line.startswith(LAUNCHER_REPORT):
                report.append(line)
            elif peer_gone:
                lost_peer.append(line)
            elif not (stopping.is_set() or failed.is_set() or interrupted or LAUNCHER_LOG.match(line)):
                sys.stderr.write(line)
            sys.stderr.flush()
            if line.startswith(ERROR) and not (interrupted or peer_gone):
                failed.set()

    relaying = threading.Thread(target=relay, daemon=True)
    relaying.start()

    def stop(signum, frame) -> None:
        stopping.set()
        try:
            os.killpg(child.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass

    previous = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        code = child.wait()
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    relaying.join(timeout=5)
    if stopping.is_set():
        return 130, [], []
    return code, [] if failed.is_set() else report, [] if failed.is_set() or report else lost_peer


def _died(report: list[str]) -> str:
    """One line from the launcher's report: which process died first, and how."""
    cause = "".join(report).partition("Root Cause")[2]
    field = {k.strip(): v.strip() for k, _, v in (line.partition(":") for line in cause.splitlines()) if v}
    rank, code = field.get("rank", "?").split()[0], field.get("exitcode", "?").split()[0]
    if code == "130":  # stopped by a signal of its own, as Ctrl-C stops it
        return INTERRUPTED
    killed = field.get("traceback", "")  # "Signal 9 (SIGKILL) received by PID ..." when a signal ended it
    how = killed if killed.startswith("Signal") else f"exit code {code}"
    return f"training process {rank} died without an error line ({how}); the launch stopped the others"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
