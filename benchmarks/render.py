"""How fast do frontend pages render? 50 generated Tailwind pages, three ways, same run:

- pool, sequential: one ``Renderer`` (one Chromium, reused pages), pages one after
  another, as a rollout renders them;
- pool, batched: the same renderer's ``render_many`` with ``pool_size`` pages at once;
- fresh browser: a new ``Renderer`` (browser launch + context + page) for every page,
  the obvious way to isolate pages.

Every render goes through the offline Tailwind stylesheet and the placeholder picture,
and the similarity of each page to its neighbour is computed once at the end (timed
separately) so the figures also say what the default reward costs.

    .venv/bin/python benchmarks/render.py
    .venv/bin/python benchmarks/render.py --pages 20 --pool-size 2 --fresh-pages 10
"""
from __future__ import annotations

import argparse
import json
import random
import statistics
import time

from colbench.render import Renderer
from colbench.similarity import SsimSimilarity

COLOURS = ["blue", "indigo", "purple", "pink", "red", "yellow", "green", "gray", "teal"]
WORDS = ("fresh local modern simple fast secure trusted friendly bright quiet open daily smart clean green "
         "studio garden market coffee travel books music sport design health family school city ocean").split()


def phrase(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n)).capitalize()


def make_page(seed: int) -> str:
    """A WebSight-like page: header, hero, a grid of cards, an optional list/CTA, footer."""
    rng = random.Random(seed)
    c1, c2 = rng.sample(COLOURS, 2)
    dark = rng.choice([700, 800, 900])
    cols = rng.choice([2, 3, 4])
    cards = "\n".join(
        '<div class="bg-white rounded-lg shadow p-6"><img'
        f' src="https://source.unsplash.com/random/400x300?{rng.choice(WORDS)}" class="w-full h-40 object-cover'
        f' mb-4"><h3 class="text-xl font-semibold text-{c1}-{dark}">{phrase(rng, 2)}</h3><p class="text-gray-600'
        f' mt-2">{phrase(rng, 12)}.</p></div>'
        for _ in range(cols * rng.choice([1, 2]))
    )
    items = "\n".join(f'<li class="py-2 border-b">{phrase(rng, 6)}</li>' for _ in range(rng.randint(3, 8)))
    extra = (
        f'<section class="bg-{c2}-100 p-10 text-center"><h2 class="text-3xl font-bold">{phrase(rng, 4)}</h2><button'
        f' class="mt-6 bg-{c2}-500 hover:bg-{c2}-700 text-white py-2 px-6 rounded">{phrase(rng, 2)}</button></section>'
        if rng.random() < 0.6
        else (
            '<section class="max-w-3xl mx-auto p-8"><h2 class="text-2xl'
            f' mb-4">{phrase(rng, 3)}</h2><ul>{items}</ul></section>'
        )
    )
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="UTF-8">
<link href="https://cdn.jsdelivr.net/npm/tailwindcss@2.2.19/dist/tailwind.min.css" rel="stylesheet">
<title>{phrase(rng, 2)}</title></head>
<body class="bg-gray-{rng.choice([50, 100, 200])} font-sans">
<header class="bg-{c1}-{dark} text-white">
  <div class="container mx-auto flex justify-between items-center p-6">
    <h1 class="text-{rng.choice(['2xl', '3xl', '4xl'])} font-bold">{phrase(rng, 2)}</h1>
    <nav \
class="space-x-6">{''.join(f'<a href="#" class="hover:underline">{phrase(rng, 1)}</a>' for _ in range(4))}</nav>
  </div>
</header>
<section class="container mx-auto py-16 px-6 flex items-center">
  <div class="w-1/2"><h2 class="text-5xl font-bold text-gray-800">{phrase(rng, 5)}</h2>
  <p class="mt-4 text-lg text-gray-600">{phrase(rng, 20)}.</p></div>
  <div class="w-1/2"><img src="https://source.unsplash.com/random/800x600?{rng.choice(WORDS)}" class="rounded-lg \
shadow-lg"></div>
</section>
<section class="container mx-auto px-6 grid grid-cols-{cols} gap-8">
{cards}
</section>
{extra}
<footer class="bg-gray-800 text-gray-300 p-6 mt-12 text-center">{phrase(rng, 4)} &copy; 2024</footer>
</body></html>"""


def run(pages: list[str], pool_size: int, fresh_pages: int) -> dict:
    out: dict = {"pages": len(pages), "pool_size": pool_size}
    start = time.monotonic()
    with Renderer(pool_size=pool_size) as renderer:
        launch = time.monotonic() - start
        renderer.render(pages[0])  # warm-up: first stylesheet load, not counted below
        t0 = time.monotonic()
        sequential = [renderer.render(p) for p in pages]
        seq_s = time.monotonic() - t0
        t0 = time.monotonic()
        batched = renderer.render_many(pages)
        batch_s = time.monotonic() - t0
    assert all(r.ok for r in sequential + batched), [r.error for r in sequential + batched if r.error]
    per_page = [r.elapsed_s for r in sequential]
    out["pool_launch_s"] = round(launch, 2)
    out["pool_sequential_pages_per_s"] = round(len(pages) / seq_s, 2)
    out["pool_sequential_median_s"] = round(statistics.median(per_page), 3)
    out["pool_batched_pages_per_s"] = round(len(pages) / batch_s, 2)

    t0 = time.monotonic()
    for page in pages[:fresh_pages]:
        with Renderer(pool_size=1) as fresh:
            assert fresh.render(page).ok
    fresh_s = time.monotonic() - t0
    out["fresh_pages"] = fresh_pages
    out["fresh_browser_pages_per_s"] = round(fresh_pages / fresh_s, 3)
    out["ratio_pool_sequential_vs_fresh"] = round(out["pool_sequential_pages_per_s"] / out["fresh_browser_pages_per_s"],
                                                  1)
    out["ratio_pool_batched_vs_fresh"] = round(out["pool_batched_pages_per_s"] / out["fresh_browser_pages_per_s"], 1)

    sim = SsimSimilarity()
    t0 = time.monotonic()
    scores = [sim.score(a.png_bytes, b.png_bytes) for a, b in zip(sequential, sequential[1:])]
    out["ssim_s_per_pair"] = round((time.monotonic() - t0) / max(1, len(scores)), 3)
    out["ssim_neighbours_mean"] = round(statistics.mean(scores), 3)
    out["png_kb_mean"] = round(statistics.mean(len(r.png_bytes) for r in sequential) / 1024, 1)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=50)
    parser.add_argument("--pool-size", type=int, default=2)
    parser.add_argument("--fresh-pages", type=int, default=None, help="pages for the fresh-browser run (default: all)")
    args = parser.parse_args()
    pages = [make_page(seed) for seed in range(args.pages)]
    result = run(pages, args.pool_size, args.fresh_pages or args.pages)
    for key, value in result.items():
        print(f"{key:36s} {value}")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
