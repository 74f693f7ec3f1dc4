"""`colbench sandbox`: build the Docker grading image, check which sandboxes work here."""
from __future__ import annotations

import time

import typer

from colbench.cli.common import console, err_console, print_json

app = typer.Typer(help="Grading sandboxes: build the Docker image, check which backends work here.",
                  no_args_is_help=True)

@app.command("image")
def image(
    tag: str = typer.Option(None, "--tag",
                            help="Name of the image. Default: $COLBENCH_GRADING_IMAGE, else colbench-grading:latest."),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
) -> None:
    """Build the Docker grading image from this machine's Python (no registry needed)."""
    from colbench.grading.sandboxes.docker import connect
    from colbench.grading.sandboxes.image import build_image, configured_image

    tag = tag or configured_image()
    engine = connect()
    started = time.monotonic()
    if as_json or not err_console.is_terminal:
        built = build_image(engine, tag)
    else:
        with err_console.status(f"building {tag}") as status:
            built = build_image(engine, tag, on_status=status.update)
    seconds = time.monotonic() - started
    if as_json:
        print_json({**built.as_dict(), "seconds": round(seconds, 2)})
        return
    console.print(
        f"built {built.tag}  {built.id.removeprefix('sha256:')[:12]}  {built.size / 1e6:.0f} MB  in {seconds:.1f}s",
        highlight=False
    )


@app.command("check")
def check(as_json: bool = typer.Option(False, "--json", help="Machine-readable output.")) -> None:
    """Which sandbox backends are usable here, why not, and which one `--sandbox auto` picks."""
    from colbench.grading.sandboxes import AUTO, SANDBOXES, SandboxUnavailable, resolve

    backends = {}
    for choice in SANDBOXES:
        why_not = choice.factory.check()
        backends[choice.name] = {"usable": why_not is None, "why_not": why_not, **choice.factory.details()}
    try:
        auto = resolve(AUTO).name
    except SandboxUnavailable:
        auto = None
    if as_json:
        print_json({"backends": backends, "auto": auto})
        return
    from rich.table import Table

    table = Table("backend", "usable", "note", title="grading sandboxes", title_justify="left")
    for name, found in backends.items():
        usable = "[green]yes[/]" if found["usable"] else "[red]no[/]"
        note = found["why_not"] or "; ".join(
            f"{key}: {value}" for key, value in found.items() if key not in ("usable", "why_not")
        )
        table.add_row(name, usable, note)
    console.print(table)
    console.print(f"--sandbox auto picks: {auto or 'nothing (install bubblewrap or build the Docker image)'}",
                  highlight=False)
