"""Frontend pages as pictures: offline Tailwind, a pooled headless Chromium, stored PNGs.

- ``prepare_html``: the page rewritten to render offline (see ``colbench.render.html``);
- ``Renderer``: ``render(html) -> RenderResult(png_bytes, error, dom_summary)``;
- ``ScreenshotStore``: content-addressed PNG files; ``side_by_side``, ``contact_sheet``: pages in one labelled picture.
"""
from colbench.render.browser import (
    CHROMIUM,
    MAX_HEIGHT,
    VIEWPORT,
    Renderer,
    RendererUnavailable,
    RenderResult,
    black_png,
)
from colbench.render.html import (
    TAILWIND_VERSION,
    TailwindMissing,
    placeholder_path,
    prepare_html,
    tailwind_css_path,
)
from colbench.render.pictures import contact_sheet, side_by_side
from colbench.render.storage import ScreenshotStore

__all__ = [
    "CHROMIUM", "MAX_HEIGHT", "VIEWPORT", "Renderer", "RendererUnavailable", "RenderResult",
    "black_png", "TAILWIND_VERSION", "TailwindMissing", "placeholder_path", "prepare_html",
    "tailwind_css_path", "ScreenshotStore", "side_by_side", "contact_sheet",
]
