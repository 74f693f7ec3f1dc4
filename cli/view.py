"""`colbench view`: the store in a browser, read-only, on loopback."""
from __future__ import annotations

import typer

from colbench.cli.common import console, state


def view(
    port: int = typer.Option(8765, "--port", min=0, max=65535, help="Port on 127.0.0.1 (0: any free one)."),
) -> None:
    """Serve a read-only web viewer of the store at http://127.0.0.1:PORT: runs, trajectories with filters,
    dialogues with per-turn critic scores, test results and (frontend) each turn's page beside the reference.
    Only this machine can reach it; pages load nothing from outside. Ctrl-C stops it."""
    from colbench.viewer import make_server

    db = state.db()
    server = make_server(db, port)
    host, bound = server.server_address[:2]
    console.print(f"colbench view: http://{host}:{bound}/ (store {db.url}); Ctrl-C stops it", highlight=False,
                  markup=False)
    try:
        server.serve_forever()
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM is how a viewer is meant to stop: not an error
        console.print("colbench view: stopped", highlight=False)
    finally:
        server.server_close()
        server.viewer.close()


def register(app: typer.Typer) -> None:
    app.command("view")(view)
