"""The `colbench` command: a Typer root that mounts one module per command group.

Errors a user can cause (bad input, a missing model, an unreachable endpoint, a
database from the future) print one line on stderr and exit non-zero; set
COLBENCH_DEBUG=1 to see the traceback instead. Ctrl-C and SIGTERM stop a command the
same way: claims are handed back, a training run is marked failed, exit code 130.
"""
from __future__ import annotations

import os
import signal
import sys
import threading

import click
import typer

from colbench.cli.common import INTERRUPTED
from colbench.cli import (
    audit,
    common,
    compare,
    credit,
    critic,
    db,
    evaluate,
    experiment,
    inspect,
    launch,
    policy,
    rollout,
    runs,
    sandbox,
    serve,
    study,
    tasks,
    trajectories,
    view
)


app = typer.Typer(
    name="colbench",
    help="ColBench and SWEET-RL: collaborative agents, simulated humans, sandboxed grading, training.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


@app.callback()
def root(
    database: str = typer.Option(
        None, "--db", envvar="COLBENCH_DB",
        help="SQLAlchemy URL of the store. Default: sqlite:///colbench.db in the working directory."
    ),
    artifacts: str = typer.Option(
        None, "--artifacts", envvar="COLBENCH_ARTIFACTS",
        help=(
            "Folder for the store's files (checkpoints, screenshots). Default: the SQLite file's folder; a PostgreSQL"
            " store needs it."
        ),
    ),
) -> None:
    common.state.db_url = database
    common.state.artifacts = artifacts


app.add_typer(db.app, name="db")
app.add_typer(audit.app, name="audit")
app.add_typer(critic.app, name="critic")
app.add_typer(credit.app, name="credit")
app.add_typer(policy.app, name="policy")
app.add_typer(policy.checkpoint_app, name="checkpoint")
app.add_typer(experiment.app, name="experiment")
app.add_typer(study.app, name="study")
app.add_typer(tasks.app, name="tasks")
app.add_typer(sandbox.app, name="sandbox")
trajectories.register(app)
inspect.register(app)
rollout.register(app)
evaluate.register(app)
launch.register(app)
runs.register(app)
compare.register(app)
view.register(app)
serve.register(app)


# Typer 0.29 ships its own copy of click; older releases use click itself. Either way
# these are the exceptions a command line raises, with the message click would print.
_EXITS = tuple({click.exceptions.Exit, typer.Exit})
_ABORTS = tuple({click.exceptions.Abort, typer.Abort, KeyboardInterrupt})
_USAGE_ERRORS = tuple({click.ClickException, getattr(typer, "TyperException", click.ClickException)})


def _stop_on_sigterm(signum, frame) -> None:
    raise KeyboardInterrupt  # a scheduler's or a container's stop: clean up as after Ctrl-C


ROOT_OPTIONS = ("--db", "--artifacts")


def hoist_root_options(argv: list[str]) -> list[str]:
    """``colbench ls --db x.db`` means ``colbench --db x.db ls``: the store's options are the root's,
    but people put them after the command; move them to the front (no command has its own)."""
    front: list[str] = []
    rest: list[str] = []
    args = iter(argv)
    for arg in args:
        if arg == "--":
            rest += [arg, *args]
            break
        name = arg.split("=", 1)[0]
        if name in ROOT_OPTIONS:
            value = [] if "=" in arg else [next(args, None)]
            if None in value:
                common.fail(f"{arg} needs a value (see colbench --help)", code=2)
            front += [arg, *value]
        else:
            rest.append(arg)
    return front + rest


def main(argv: list[str] | None = None) -> None:
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _stop_on_sigterm)
    command = typer.main.get_command(app)
    argv = hoist_root_options(sys.argv[1:] if argv is None else list(argv))
    try:
        code = command.main(args=argv, prog_name="colbench", standalone_mode=False)
        if code == 130:  # Typer turns Ctrl-C into an exit code of 130 (no command returns it)
            common.fail(INTERRUPTED, code=130)
    except _EXITS as exc:
        code = exc.exit_code
    except _ABORTS:
        common.fail(INTERRUPTED, code=130)
    except _USAGE_ERRORS as exc:
        if not hasattr(exc, "format_message"):
            raise
        code = getattr(exc, "exit_code", 2)
        message = exc.format_message()
        if message:  # empty after `colbench` alone, whose help is already printed
            context = getattr(exc, "ctx", None)
            common.fail(message + (f" (see {context.command_path} --help)" if context is not None else ""), code=code)
    except Exception as exc:  # anything else still gets one line, never a traceback
        if os.environ.get("COLBENCH_DEBUG"):
            raise
        common.fail(common.describe(exc))
    code = code if isinstance(code, int) else 0
    if code == 0:
        _end_process_group()
    sys.exit(code)


def _end_process_group() -> None:
    """A process of `launch -n N` that exits with its gloo group alive can abort in the interpreter's teardown
    ("terminate called without an active exception", pytorch#190489), failing a run that succeeded. Only after
    success: ending it while another process is still in a collective would hang that one."""
    distributed = sys.modules.get("torch.distributed")
    if distributed is not None and distributed.is_available() and distributed.is_initialized():
        distributed.destroy_process_group()


if __name__ == "__main__":
    main()
