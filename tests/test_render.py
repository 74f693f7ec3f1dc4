"""Rendering frontend pages: offline Tailwind, placeholder pictures, bad pages, the pool, storage.

One real Chromium for the whole module (launching one costs ~1.5 s)."""
from __future__ import annotations

import io
import threading
import time

import numpy as np
import pytest
from PIL import Image

from colbench.render import (
    MAX_HEIGHT,
    Renderer,
    ScreenshotStore,
    black_png,
    placeholder_path,
    prepare_html,
    side_by_side,
    tailwind_css_path,
)
from colbench.render.html import uses_tailwind_classes

CDN_LINK = '<link href="https://cdn.jsdelivr.net/npm/tailwindcss@2.2.19/dist/tailwind.min.css" rel="stylesheet">'
BLUE_500 = (59, 130, 246)  # Tailwind 2's bg-blue-500

TAILWIND_PAGE = f"""<!DOCTYPE html>
<html><head>{CDN_LINK}</head>
<body class="bg-white">
  <div class="bg-blue-500" style="width: 300px; height: 200px"></div>
  <p class="text-4xl font-bold text-red-600 p-8">Hello</p>
</body></html>"""


def image(png: bytes) -> Image.Image:
    return Image.open(io.BytesIO(png)).convert("RGB")


def close_to(pixel, colour, tolerance=6) -> bool:
    return all(abs(a - b) <= tolerance for a, b in zip(pixel, colour))


@pytest.fixture(scope="module")
def renderer():
    with Renderer(pool_size=2, timeout_s=8) as r:
        yield r


# -- prepare_html (no browser) --------------------------------------------------------------


def test_installed_assets_are_there():
    css = tailwind_css_path()
    assert css.stat().st_size > 2_000_000  # the full v2 build, not a purged one
    assert ".bg-blue-500" in css.read_text(encoding="utf-8")[:3_000_000]
    assert image(placeholder_path().read_bytes()).size == (400, 300)


def test_prepare_rewrites_cdn_tags_to_the_local_stylesheet():
    local = tailwind_css_path().resolve().as_uri()
    for tag in (CDN_LINK, '<script src="https://cdn.tailwindcss.com"></script>',
                "<link rel=stylesheet href=//unpkg.com/tailwindcss@^2/dist/tailwind.min.css>"):
        page = f"<html><head>{tag}</head><body><p class='text-xl'>x</p></body></html>"
        linked = prepare_html(page, purge=False)
        assert "cdn" not in linked and "unpkg" not in linked
        assert linked.count(local) == 1
        inlined = prepare_html(page)  # the default: only the rules the page uses, inline
        assert "cdn" not in inlined and local not in inlined
        assert inlined.count("<style") == 1 and ".text-xl{" in inlined and ".text-2xl{" not in inlined


def test_prepare_injects_the_stylesheet_only_for_tailwind_pages():
    local = tailwind_css_path().resolve().as_uri()
    assert local in prepare_html('<div class="flex p-4 bg-gray-100">x</div>', purge=False)
    assert ".bg-gray-100{" in prepare_html('<div class="flex p-4 bg-gray-100">x</div>')
    for purge in (True, False):
        plain = prepare_html('<div class="my-widget">plain</div><p>text</p>', purge=purge)
        assert local not in plain and "<style" not in plain
    assert uses_tailwind_classes("<a class='md:text-xl hover:bg-blue-700'>")
    assert not uses_tailwind_classes("<a class='button primary'>")


def test_prepare_points_external_pictures_at_the_placeholder():
    ph = placeholder_path().resolve().as_uri()
    page = prepare_html(
        '<html><body><img src="https://source.unsplash.com/random/300x200?cat">'
        "<img src=//example.com/a.png alt=x>"
        '<img srcset="https://a.com/1.jpg 1x, https://a.com/2.jpg 2x">'
        '<img src="data:image/png;base64,AAAA">'
        "<div style=\"background-image: url('https://a.com/bg.jpg')\"></div>"
        "<style>.hero { background: url(http://a.com/hero.png) }</style>"
        '<div style="background:url(&quot;https://a.com/q.jpg&quot;)"></div></body></html>'
    )
    for url in ("unsplash", "example.com", "a.com"):
        assert url not in page
    assert page.count(ph) == 7
    assert 'src="data:image/png;base64,AAAA"' in page


def test_prepare_wraps_snippets_into_a_document():
    body_only = prepare_html('<body class="p-4"><h1>Hi</h1></body>')
    assert body_only.lower().count("<html") == 1 and '<meta charset="utf-8">' in body_only
    fragment = prepare_html("<h1>Hi</h1>")
    assert "<body>" in fragment and fragment.index("<head>") < fragment.index("<h1>")


# -- rendering -----------------------------------------------------------------------------


def test_tailwind_classes_apply_only_with_the_local_stylesheet(renderer):
    styled = renderer.render(TAILWIND_PAGE)
    unstyled = renderer.render(TAILWIND_PAGE, prepare=False)  # the CDN tag as written: blocked
    assert styled.ok and unstyled.ok
    a, b = image(styled.png_bytes), image(unstyled.png_bytes)
    assert a.size[0] == b.size[0] == 1280
    assert close_to(a.getpixel((150, 100)), BLUE_500)  # bg-blue-500 box, where the class applies
    assert close_to(b.getpixel((150, 100)), (255, 255, 255))  # no stylesheet: a white page
    assert any("cdn.jsdelivr.net" in url for url in renderer.blocked)
    region = np.asarray(a.crop((0, 200, 400, 320))).astype(int)
    red_text = (region[..., 0] > 180) & (region[..., 1] < 80) & (region[..., 2] < 80)
    assert red_text.sum() > 50  # text-red-600 applies too
    texts = {t["text"]: t for t in styled.dom_summary["texts"]}
    assert texts["Hello"]["font_size"] == 36 and texts["Hello"]["bold"]


def test_external_images_show_the_placeholder_and_nothing_leaves(renderer):
    page = ('<html><body style="margin:0"><img src="https://images.example.org/cat.jpg" '
            'style="width:400px;height:300px;display:block"></body></html>')
    renderer.blocked.clear()
    result = renderer.render(page)
    assert result.ok and list(renderer.blocked) == []  # no request was even attempted
    assert close_to(image(result.png_bytes).getpixel((100, 150)), (204, 204, 204))
    # Control: the same page unrewritten does try the web, and the route refuses it.
    raw = renderer.render(page, prepare=False)
    assert "https://images.example.org/cat.jpg" in renderer.blocked
    assert not close_to(image(raw.png_bytes).getpixel((100, 150)), (204, 204, 204))


def test_local_files_outside_the_render_folder_are_refused(renderer):
    renderer.blocked.clear()
    result = renderer.render('<html><body><iframe src="file:///etc/passwd"></iframe>'
                             '<script src="http://127.0.0.1:9/x.js"></script></body></html>')
    assert result.ok
    assert "file:///etc/passwd" in renderer.blocked
    assert "http://127.0.0.1:9/x.js" in renderer.blocked


@pytest.mark.parametrize("html, error", [
    ("", "empty page"),
    ("   \n ", "empty page"),
    ("just some words, no markup at all", "not HTML"),
    ("<p>nul\x00byte</p>", "NUL"),
])
def test_bad_input_gives_an_error_and_the_black_image(renderer, html, error):
    result = renderer.render(html)
    assert result.error and error in result.error
    assert result.png_bytes == black_png()
    assert result.dom_summary is None


@pytest.mark.parametrize("script", [
    "<script>while (true) {}</script>",  # blocks parsing: load never fires
    "<script>setTimeout(() => { for (;;) {} }, 0)</script>",  # hangs after load
])
def test_hanging_pages_time_out_to_black_and_the_pool_recovers(renderer, script):
    renderer.timeout_s, saved = 2.0, renderer.timeout_s
    try:
        start = time.monotonic()
        result = renderer.render(f"<html><body><h1>Hang</h1>{script}</body></html>")
        assert time.monotonic() - start < 8
    finally:
        renderer.timeout_s = saved
    assert result.error and "timed out" in result.error
    img = image(result.png_bytes)
    assert img.size == (1280, 800) and img.getextrema() == ((0, 0), (0, 0), (0, 0))
    after = renderer.render(TAILWIND_PAGE)
    assert after.ok and close_to(image(after.png_bytes).getpixel((150, 100)), BLUE_500)


def test_the_pool_is_reused_across_many_renders(renderer):
    replaced, restarts = renderer.stats.slots_replaced, renderer.stats.browser_restarts
    pages = [f'<div class="p-4" style="height:{900 + 37 * i}px"><h1 class="text-2xl">Page {i}</h1></div>'
             for i in range(12)]
    results = renderer.render_many(pages)
    results += [renderer.render(p) for p in pages[:6]]
    assert all(r.ok for r in results)
    heights = [image(r.png_bytes).size[1] for r in results[:12]]
    assert heights == [900 + 37 * i for i in range(12)]  # input order kept (preflight: border-box, no margin)
    assert [t["text"] for t in results[3].dom_summary["texts"]] == ["Page 3"]
    assert renderer.stats.slots_replaced == replaced and renderer.stats.browser_restarts == restarts


def test_full_page_screenshots_are_capped(renderer):
    result = renderer.render('<div style="height: 20000px; background: linear-gradient(red, blue)"></div>')
    assert result.ok and image(result.png_bytes).size == (1280, MAX_HEIGHT)
    short = renderer.render("<p>tiny</p>")
    assert image(short.png_bytes).size == (1280, 800)  # never shorter than the viewport


def test_render_from_several_threads(renderer):
    out: dict[int, object] = {}

    def work(i):
        out[i] = renderer.render(f"<h1>Thread {i}</h1>")

    threads = [threading.Thread(target=work, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sorted(out) == [0, 1, 2]
    assert all(out[i].ok and out[i].dom_summary["texts"][0]["text"] == f"Thread {i}" for i in range(3))


def test_dom_summary_describes_sections(renderer):
    page = """<html><head>{cdn}</head><body>
      <header class="bg-blue-900 text-white p-4"><h1 class="text-3xl">Shop</h1></header>
      <section class="grid grid-cols-3 gap-4 p-4"><div>A</div><div>B</div><div>C</div></section>
      <footer class="bg-gray-800 text-gray-200 p-2">Bye</footer></body></html>""".format(cdn=CDN_LINK)
    dom = renderer.render(page).dom_summary
    assert [s["tag"] for s in dom["sections"]] == ["header", "section", "footer"]
    header, grid, footer = dom["sections"]
    assert header["background"] == [30, 58, 138] and header["color"] == [255, 255, 255]
    assert header["headings"] == ["Shop"] and grid["columns"] == 3 and footer["text"] == "Bye"
    assert header["box"][1] < grid["box"][1] < footer["box"][1]


# -- storage ---------------------------------------------------------------------------------


def test_screenshot_store_is_content_addressed(tmp_path):
    store = ScreenshotStore(tmp_path / "shots")
    png = black_png(64, 32)
    digest, path = store.put(png)
    assert path == tmp_path / "shots" / digest[:2] / f"{digest}.png"
    assert store.put(png) == (digest, path) and path.read_bytes() == png
    assert digest in store and store.get(digest) == png
    other, _ = store.put(black_png(32, 32))
    assert other != digest and len(list((tmp_path / "shots").rglob("*.png"))) == 2


def _png(color, size) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", size, color).save(buf, "PNG")
    return buf.getvalue()


def test_side_by_side_puts_agent_left_and_reference_right_under_a_title():
    joined = image(side_by_side(_png((255, 0, 0), (100, 50)), _png((0, 0, 255), (80, 120)), gap=10,
                                title="task 7 · ssim-edges 0.812"))
    top = joined.height - 120  # title and label bands above the pages
    assert joined.width == 190 and top > 40
    assert joined.getpixel((50, top + 10)) == (255, 0, 0) and joined.getpixel((150, top + 100)) == (0, 0, 255)
    untitled = image(side_by_side(_png((255, 0, 0), (100, 50)), _png((0, 0, 255), (80, 120)), gap=10))
    assert untitled.height < joined.height  # the title takes its own band
    band = np.asarray(joined.crop((0, 0, joined.width, top - 30)))
    assert (band.min(axis=2) > 200).sum() > 20  # and is written in it (light text on the grey ground)


def test_a_missing_page_is_a_placeholder_not_a_black_image():
    from colbench.render.pictures import contact_sheet

    sheet = image(contact_sheet([("turn 1", None), ("turn 2", black_png(640, 400)),
                                 ("reference", _png((0, 0, 255), (640, 400)))],
                                frame_width=320, gap=0))
    assert sheet.width == 960
    placeholder = np.asarray(sheet.crop((0, sheet.height - 150, 320, sheet.height - 50)))
    black = np.asarray(sheet.crop((320, sheet.height - 150, 640, sheet.height - 50)))
    assert placeholder.mean() > 180 and black.max() == 0  # light grey with text, not the black render
    assert len(np.unique(placeholder.reshape(-1, 3), axis=0)) > 2  # it says something


def test_purged_stylesheet_renders_exactly_like_the_full_one(renderer):
    page = f"""<html><head>{CDN_LINK}</head><body class="bg-gray-50">
      <nav class="flex space-x-4 divide-x divide-gray-300 p-4 md:p-8 2xl:p-16"><a>One</a><a>Two</a></nav>
      <div class="group hover:bg-red-100 grid grid-cols-1 md:grid-cols-3 lg:grid-cols-4 gap-4 p-6">
        <p class="group-hover:text-white text-sm sm:text-lg lg:text-2xl">A</p><p class="w-1/2 shadow-lg">B</p>
        <p class="-mt-2 bg-gradient-to-r from-purple-500 to-pink-500 h-12"></p></div>
      <ul class="list-disc pl-8 space-y-2"><li class="animate-pulse">x</li><li class="tracking-wider">y</li></ul>
    </body></html>"""
    purged = prepare_html(page)
    assert "<style" in purged and len(purged) < 30_000 and tailwind_css_path().resolve().as_uri() not in purged
    assert tailwind_css_path().resolve().as_uri() in prepare_html(page, purge=False)
    fast = renderer.render(page)
    renderer.purge = False
    try:
        full = renderer.render(page)
    finally:
        renderer.purge = True
    assert fast.ok and full.ok and fast.png_bytes == full.png_bytes
