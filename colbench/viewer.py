"""`colbench view`: a read-only web viewer over the store, on loopback.

A small server of our own (the standard library's threading HTTP server): GET only, bound
to 127.0.0.1, every response with a Content-Security-Policy that lets a page load nothing
but this server's own images, so stored model output can neither run nor call out.
Routes:

    /                      runs (filters: kind, tag)
    /run/<ref>             one run: facts, data, per-step curves, settings
    /trajectories          trajectories (filters: run, policy, status, family, split, task, reward)
    /trajectory/<id>       one dialogue with critic scores, test results, per-turn pages
    /screenshot/<sha256>   a stored page render
    /reference/<task>.png  a frontend task's reference page, rendered once (needs the browser)
"""
from __future__ import annotations

import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

from colbench import viewer_pages as pages
from colbench.families import family as family_named
from colbench.tasks.rows import spec_of

HOST = "127.0.0.1"
PAGE_ROWS = 100
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; img-src 'self'; style-src 'unsafe-inline'; form-action 'self'; base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


class Viewer:
    """What the pages are made from: the store, read only, and the reference renders."""

    def __init__(self, db):
        self.db = db
        self._references: dict[int, bytes] = {}
        self._renderer = None
        self._render_lock = threading.Lock()

    # -------------------------------------------------- pages

    def runs(self, query: dict) -> str:
        from colbench.runs import listing

        kind = query.get("kind") or None
        rows = listing(self.db, kind=kind if kind in ("rollout", "train", "eval") else None,
                       tag=query.get("tag") or None)
        return pages.runs_page(rows, query)

    def run(self, ref: str) -> str | None:
        from colbench.runs import RunNotFound, details

        try:
            return pages.run_page(details(self.db, ref))
        except RunNotFound:
            return None

    def trajectories(self, query: dict) -> str:
        from colbench.runs import RunNotFound, rollout_id_of
        from colbench.store import queries

        def number(name, kind=float):
            try:
                return kind(query[name]) if query.get(name) else None
            except ValueError:
                return None

        rollout_id = None
        if query.get("run"):
            try:
                rollout_id = rollout_id_of(self.db, query["run"])
            except RunNotFound:
                rollout_id = -1  # matches nothing: the page says so
        offset = max(number("offset", int) or 0, 0)
        flt = queries.TrajectoryFilter(
            task_id=number("task", int), policy=query.get("policy") or None, status=query.get("status") or None,
            family=query.get("family") or None, split=query.get("split") or None, min_reward=number("min_reward"),
            max_reward=number("max_reward"), rollout_id=rollout_id, limit=PAGE_ROWS, offset=offset,
        )
        with self.db.read() as session:
            rows = queries.find_trajectories(session, flt)
        return pages.trajectories_page(rows, query, offset=offset, limit=PAGE_ROWS)

    def trajectory(self, trajectory_id: int) -> str | None:
        from colbench.store import queries

        with self.db.read() as session:
            found = queries.trajectory_with_task(session, trajectory_id)
            if found is None:
                return None
            trajectory, task = found
            turns = queries.turns_of(session, trajectory_id)
            tests = queries.test_results_of(session, trajectory_id)
            scores = queries.critic_scores_of(session, trajectory_id)
        return pages.dialogue_page(trajectory, task, turns, tests, scores)

    def screenshot(self, sha256: str) -> bytes | None:
        from colbench.store import queries

        with self.db.read() as session:
            path = queries.screenshot_paths(session, [sha256]).get(sha256)
        if path is None:
            return None
        path = Path(path) if Path(path).is_absolute() else self.db.folder / path
        return path.read_bytes() if path.is_file() else None

    def reference(self, task_id: int) -> bytes | None:
        """The reference page of a frontend task, rendered on first request (the browser starts then)."""
        from colbench.store.models import Task

        if task_id not in self._references:
            with self.db.read() as session:
                task = session.get(Task, task_id)
            page = None if task is None else family_named(task.family).reference_page(spec_of(task))
            if page is None:
                return None
            with self._render_lock:
                if self._renderer is None:
                    from colbench.render.browser import Renderer

                    self._renderer = Renderer(pool_size=1).start()
                self._references[task_id] = self._renderer.render(page).png_bytes
        return self._references[task_id]

    def close(self) -> None:
        if self._renderer is not None:
            self._renderer.close()


def make_server(db, port: int = 0) -> ThreadingHTTPServer:
    """The viewer's server on 127.0.0.1:``port`` (0: any free port); call serve_forever()."""
    viewer = Viewer(db)

    class Handler(BaseHTTPRequestHandler):
        server_version = "colbench-view"

        def do_GET(self) -> None:
            url = urlsplit(self.path)
            query = {k: v[-1] for k, v in parse_qs(url.query).items()}
            path = unquote(url.path)
            try:
                self._route(path, query)
            except Exception as exc:  # one bad row must not take the viewer down
                self._send(HTTPStatus.INTERNAL_SERVER_ERROR,
                           pages.page("error", f"<p>{pages.escape(str(exc))}</p>").encode())

        def _route(self, path: str, query: dict) -> None:
            if path == "/":
                return self._html(viewer.runs(query))
            if path.startswith("/run/"):
                return self._html(viewer.run(path[5:]), f"no run {path[5:]}")
            if path == "/trajectories":
                return self._html(viewer.trajectories(query))
            if path.startswith("/trajectory/") and path[12:].isdigit():
                return self._html(viewer.trajectory(int(path[12:])), f"no trajectory {path[12:]}")
            if path.startswith("/screenshot/") and path[12:].isalnum():
                return self._png(viewer.screenshot(path[12:]))
            if path.startswith("/reference/") and path.endswith(".png") and path[11:-4].isdigit():
                return self._png(viewer.reference(int(path[11:-4])))
            self._html(None, f"no page {path}")

        def _html(self, body: str | None, missing: str = "") -> None:
            if body is None:
                return self._send(HTTPStatus.NOT_FOUND, pages.not_found(missing).encode())
            self._send(HTTPStatus.OK, body.encode())

        def _png(self, data: bytes | None) -> None:
            if data is None:
                return self._send(HTTPStatus.NOT_FOUND, b"", "text/plain")
            self._send(HTTPStatus.OK, data, "image/png")

        def _send(self, status, data: bytes, kind: str = "text/html; charset=utf-8") -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            for name, value in SECURITY_HEADERS.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

        def _refuse(self) -> None:
            self._send(HTTPStatus.METHOD_NOT_ALLOWED, b"the viewer only reads", "text/plain")

        do_POST = do_PUT = do_DELETE = do_PATCH = _refuse

        def log_message(self, format, *args) -> None:  # quiet: the terminal shows the address, not every request
            pass

    server = ThreadingHTTPServer((HOST, port), Handler)
    server.daemon_threads = True
    server.viewer = viewer
    return server
