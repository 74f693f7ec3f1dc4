"""Render HTML to a full-page PNG in a real browser: Debian's Chromium driven by Playwright.

One ``Renderer`` owns one headless Chromium and a pool of reused pages. A launch plus a
fresh page costs ~2 s, while a render on a reused page costs ~0.4 s (benchmarks/render.py:
about 5x the throughput), so a rollout keeps one ``Renderer`` open for its whole run::

    with Renderer(pool_size=2) as renderer:
        result = renderer.render(html)           # RenderResult(png_bytes, error, dom_summary)
        results = renderer.render_many(pages)     # up to pool_size at once

Offline by construction, whatever the page asks for:
- the browser is ``/usr/bin/chromium`` (never a downloaded build), with background
  networking, component updates, sync and QUIC off and DNS mapped to nothing;
- every request is routed through us: ``data:``/``about:`` and ``file:`` URLs under the
  page's own folder and the bundled assets go through; everything else (the web, other
  local files) is aborted and logged in ``blocked``;
- the page is first rewritten by ``prepare_html`` (local Tailwind, placeholder pictures;
  by default only the Tailwind rules the page uses are inlined, see ``tailwind.py``).

A reused page keeps its origin's storage (localStorage) between renders; pages are
independent otherwise. Screenshots are ``viewport`` wide, at least its height and at most
``max_height`` tall, at device scale 1.

Bad pages never raise: empty input, input with no markup, a page that does not finish
loading within ``timeout_s`` (an infinite script loop, say) or a crash each give a
``RenderResult`` with ``error`` set and the protocol's BLACK image of the viewport size.
A page that timed out is thrown away with its browser context (each pool slot has its
own context, so its own renderer process) and replaced by a fresh one.

Threads: Playwright objects belong to one event loop, so the renderer runs async
Playwright on a private loop in a background thread and its public methods hand work to
it. ``render``/``render_many`` may therefore be called from any thread, several at once;
at most ``pool_size`` pages render concurrently and the rest wait for a free page. (A
rollout calls it from one thread; the lock-free hand-off costs nothing there.)
"""
from __future__ import annotations

from colbench.errors import ColbenchError

import asyncio
import io
import itertools
import os
import shutil
import tempfile
import threading
import time
from collections import deque
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from colbench.render.dom import DOM_SUMMARY_JS
from colbench.render.html import ASSETS, looks_like_html, prepare_html, tailwind_css_path

CHROMIUM = os.environ.get("COLBENCH_CHROMIUM", "/usr/bin/chromium")
VIEWPORT = (1280, 800)  # the notes' size; every screenshot is this wide
MAX_HEIGHT = 4000  # full-page screenshots are cut here so one endless page stays cheap

# Measured on these machines (see the rendering notes). --no-sandbox because we run as
# root in a container, where Chromium's own sandbox cannot start; the page still cannot
# reach anything, since every request is routed through us.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-extensions",
    "--mute-audio",
    "--hide-scrollbars",  # scrollbars would differ between a short and a long page
    "--host-resolver-rules=MAP * ~NOTFOUND",  # belt and braces: no name resolves
]


class RendererUnavailable(ColbenchError, RuntimeError):
    """The browser cannot be started (not installed, or it crashed at launch)."""


@dataclass
class RenderResult:
    png_bytes: bytes  # full-page screenshot, or the black image when error is set
    error: str | None = None
    dom_summary: dict[str, Any] | None = None  # see colbench.render.dom; None on error
    elapsed_s: float = 0.0

    @property
    def ok(self) -> bool:
        return self.error is None


_black_cache: dict[tuple[int, int], bytes] = {}


def black_png(width: int = VIEWPORT[0], height: int = VIEWPORT[1]) -> bytes:
    """The protocol's image for a page that could not be rendered."""
    key = (width, height)
    if key not in _black_cache:
        from PIL import Image

        buf = io.BytesIO()
        Image.new("RGB", key, (0, 0, 0)).save(buf, format="PNG")
        _black_cache[key] = buf.getvalue()
    return _black_cache[key]


def _one_line(exc: BaseException | str, limit: int = 300) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    # Playwright appends a multi-line call log; its first sentence is the useful part.
    text = text.split(" Call log:")[0]
    return text[:limit]


@dataclass
class _Slot:
    context: Any
    page: Any
    renders: int = 0


@dataclass
class RendererStats:
    renders: int = 0
    errors: int = 0
    slots_replaced: int = 0
    browser_restarts: int = 0
    blocked_requests: int = 0
    render_seconds: deque = field(default_factory=lambda: deque(maxlen=1000))  # the latest good renders


class Renderer:
    def __init__(
        self,
        pool_size: int = 2,
        *,
        viewport: tuple[int, int] = VIEWPORT,
        max_height: int = MAX_HEIGHT,
        timeout_s: float = 10.0,
        executable: str = CHROMIUM,
        extra_args: list[str] | None = None,
        purge: bool = True,
    ):
        self.pool_size = max(1, int(pool_size))
        self.viewport = viewport
        self.max_height = max(viewport[1], int(max_height))
        self.timeout_s = float(timeout_s)
        self.executable = executable
        self.args = CHROMIUM_ARGS + list(extra_args or [])
        self.purge = purge  # inline only the Tailwind rules a page uses (see render/tailwind.py)
        self.stats = RendererStats()
        self.blocked: deque[str] = deque(maxlen=500)  # URLs the route refused, newest last
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._tmp: Path | None = None
        self._names = itertools.count()
        self._pw = None
        self._browser = None
        self._slots: asyncio.Queue | None = None
        self._allowed_roots: tuple[str, ...] = ()

    # -- lifecycle --------------------------------------------------------------------------

    def __enter__(self) -> "Renderer":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def start(self) -> "Renderer":
        if self._loop is not None:
            return self
        if not Path(self.executable).exists():
            raise RendererUnavailable(
                f"no browser at {self.executable}: install Debian's chromium (scripts/setup.sh does)"
            )
        tailwind_css_path()  # fail now, with the install hint, rather than render unstyled pages
        self._tmp = Path(tempfile.mkdtemp(prefix="colbench-render-"))
        # Only our own page files and the bundled assets may be read through file: URLs,
        # so a page cannot show other local files (an <iframe src="file:///etc/...">).
        roots = {self._tmp.resolve().as_uri() + "/", ASSETS.resolve().as_uri() + "/",
                 tailwind_css_path().resolve().parent.as_uri() + "/"}
        self._allowed_roots = tuple(sorted(roots))
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="colbench-renderer", daemon=True)
        self._thread.start()
        try:
            self._call(self._astart(), timeout=60)
        except BaseException as exc:
            self.close()
            raise RendererUnavailable(f"could not start {self.executable}: {_one_line(exc)}") from exc
        return self

    def close(self) -> None:
        if self._loop is None:
            return
        try:
            self._call(self._aclose(), timeout=30)
        except Exception:  # noqa: BLE001 - closing is best effort; the process dies with us anyway
            pass
        self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._loop.close()
        self._loop = self._thread = None
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None

    # -- public API -------------------------------------------------------------------------

    def render(self, html: str, *, prepare: bool = True) -> RenderResult:
        """One page. ``prepare=False`` renders the HTML exactly as given, without the
        offline rewrite (tests and comparisons: a CDN tag then simply fails to load)."""
        return self.render_many([html], prepare=prepare)[0]

    def render_many(self, pages: list[str], *, prepare: bool = True) -> list[RenderResult]:
        """Render several pages, up to ``pool_size`` at once; results in input order."""
        if self._loop is None:
            self.start()
        if not pages:
            return []

        async def run_all():
            return await asyncio.gather(*(self._arender(html, prepare) for html in pages))

        # Each page has its own timeout inside; this outer one only guards against a bug.
        return self._call(run_all(), timeout=(self.timeout_s + 30) * (len(pages) / self.pool_size + 2))

    def black(self) -> bytes:
        return black_png(*self.viewport)

    # -- the loop thread ----------------------------------------------------------------------

    def _call(self, coro, timeout: float):
        assert self._loop is not None
        future: Future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        return future.result(timeout=timeout)

    async def _astart(self) -> None:
        from playwright.async_api import async_playwright

        self._pw = await async_playwright().start()
        await self._launch()

    async def _launch(self) -> None:
        # Playwright gives every launch a fresh temporary user-data dir (profile) and
        # deletes it on close, so no state survives between renderers.
        self._browser = await self._pw.chromium.launch(
            executable_path=self.executable, headless=True, args=self.args, timeout=30_000
        )
        self._slots = asyncio.Queue()
        for _ in range(self.pool_size):
            self._slots.put_nowait(await self._new_slot())

    async def _new_slot(self) -> _Slot:
        context = await self._browser.new_context(
            viewport={"width": self.viewport[0], "height": self.viewport[1]},
            device_scale_factor=1,
            service_workers="block",
        )
        await context.route("**/*", self._route)
        page = await context.new_page()
        # Pop-ups a page opens would pile up in a reused context: close them at once.
        page.on("popup", lambda popup: asyncio.ensure_future(self._close_popup(popup)))
        page.set_default_timeout(self.timeout_s * 1000)
        return _Slot(context, page)

    @staticmethod
    async def _close_popup(popup) -> None:
        try:
            await popup.close()
        except Exception:  # noqa: BLE001
            pass

    async def _route(self, route) -> None:
        url = route.request.url
        if url.startswith(("data:", "about:")) or (url.startswith("file:") and url.startswith(self._allowed_roots)):
            await route.continue_()
            return
        self.stats.blocked_requests += 1
        self.blocked.append(url)
        await route.abort("blockedbyclient")

    async def _aclose(self) -> None:
        if self._browser is not None:
            try:
                await self._browser.close()
            except Exception:  # noqa: BLE001
                pass
            self._browser = None
        if self._pw is not None:
            await self._pw.stop()
            self._pw = None

    async def _arender(self, html: str, prepare: bool = True) -> RenderResult:
        start = time.monotonic()
        self.stats.renders += 1
        if not isinstance(html, str) or not looks_like_html(html):
            return self._failed("empty page: no HTML to render" if not (html or "").strip()
                                else "not HTML: the text has no markup", start)
        if "\x00" in html:
            return self._failed("not HTML: the text contains NUL bytes", start)
        try:
            page_html = prepare_html(html, purge=self.purge) if prepare else html
        except Exception as exc:  # noqa: BLE001
            return self._failed(f"could not prepare the page: {_one_line(exc)}", start)
        assert self._tmp is not None and self._slots is not None
        path = self._tmp / f"page-{next(self._names)}.html"
        path.write_text(page_html, encoding="utf-8")
        slot = await self._slots.get()
        keep = False
        try:
            png, dom = await asyncio.wait_for(self._shoot(slot.page, path.as_uri()), self.timeout_s)
            keep = True
            slot.renders += 1
            elapsed = time.monotonic() - start
            self.stats.render_seconds.append(elapsed)
            return RenderResult(png_bytes=png, dom_summary=dom, elapsed_s=elapsed)
        except asyncio.TimeoutError:
            return self._failed(f"render timed out after {self.timeout_s:g}s (the page never finished loading)", start)
        except Exception as exc:  # noqa: BLE001 - a crashed page is a failed render, not a crash
            return self._failed(f"render failed: {_one_line(exc)}", start)
        finally:
            path.unlink(missing_ok=True)
            if keep:
                self._slots.put_nowait(slot)
            else:
                self._slots.put_nowait(await self._replace(slot))

    async def _shoot(self, page, url: str) -> tuple[bytes, dict | None]:
        await page.goto(url, wait_until="load")
        await page.evaluate("document.fonts.ready.then(() => true)")
        dom = await page.evaluate(DOM_SUMMARY_JS)
        height = await page.evaluate(
            "Math.max(document.documentElement.scrollHeight, document.body ? document.body.scrollHeight : 0)"
        )
        height = min(max(int(height or 0), self.viewport[1]), self.max_height)
        clip = {"x": 0, "y": 0, "width": self.viewport[0], "height": height}
        png = await page.screenshot(full_page=True, clip=clip, animations="disabled", caret="hide", type="png")
        return png, dom

    async def _replace(self, slot: _Slot) -> _Slot:
        """Throw a bad slot away (its context takes its renderer process along) and make another."""
        self.stats.slots_replaced += 1
        try:
            await asyncio.wait_for(slot.context.close(), 5)
        except Exception:  # noqa: BLE001 - a hung context is killed with the browser below if need be
            pass
        try:
            return await asyncio.wait_for(self._new_slot(), 15)
        except Exception:  # noqa: BLE001 - the browser itself is gone or stuck: start a new one
            return await self._restart_browser()

    async def _restart_browser(self) -> _Slot:
        self.stats.browser_restarts += 1
        old = self._browser
        try:
            await asyncio.wait_for(old.close(), 10)
        except Exception:  # noqa: BLE001
            pass
        # Other slots belonged to the old browser; renders holding them fail and replace
        # them in turn, by which time the new browser is up.
        self._browser = await self._pw.chromium.launch(
            executable_path=self.executable, headless=True, args=self.args, timeout=30_000
        )
        return await self._new_slot()

    def _failed(self, error: str, start: float) -> RenderResult:
        self.stats.errors += 1
        return RenderResult(png_bytes=self.black(), error=error, elapsed_s=time.monotonic() - start)
