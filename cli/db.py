"""`colbench db`: schema revision and upgrades."""
from __future__ import annotations

import typer

from colbench.cli.common import console, fail, print_json, state

app = typer.Typer(help="The store's schema: show its revision, upgrade it.", no_args_is_help=True)


@app.command("status")
def status(as_json: bool = typer.Option(False, "--json", help="Machine-readable output.")) -> None:
    """Show the database URL, its schema revision and the newest revision this colbench knows."""
    from colbench.store.db import Database
    from colbench.store.migrate import current_revision, head_revision, is_known

    db = Database(state.db_url, migrate=False)
    current, head = current_revision(db), head_revision()
    newer = current is not None and not is_known(current)
    payload = {"url": db.safe_url, "revision": current, "head": head, "up_to_date": current == head, "newer": newer}
    if as_json:
        print_json(payload)
    elif newer:
        console.print(
            f"database  {db.safe_url}\nrevision  {current}\nhead      {head}  [red]newer than this colbench[/]"
        )
    else:
        mark = "[green]up to date[/]" if current == head else "[yellow]needs `colbench db upgrade`[/]"
        console.print(f"database  {db.safe_url}\nrevision  {current or '(empty)'}\nhead      {head}  {mark}")
    if newer:
        fail(
            f"database {db.safe_url} is at revision {current}, newer than this colbench knows (head {head}): upgrade"
            " colbench to use it"
        )


@app.command("upgrade")
def upgrade(revision: str = typer.Argument("head", help="Target revision.")) -> None:
    """Bring the database schema to the newest revision (also done on first use)."""
    from colbench.store.db import Database
    from colbench.store.migrate import upgrade as run_upgrade

    db = Database(state.db_url, migrate=False)
    reached = run_upgrade(db, revision)
    console.print(f"database {db.safe_url} is at revision {reached}")
