"""The two frontend simulated humans: the vision-model endpoint and the built-in stand-in.

The built-in one is tested on real renders of pairs of pages; the vision one against the
loopback OpenAI-compatible server, which must receive exactly the two screenshots."""
from __future__ import annotations

import base64
import re

import pytest

from colbench.families import family
from colbench.render import Renderer, black_png
from colbench.simulators import make_simulator
from colbench.simulators.base import SimRequest
from colbench.simulators.rulebased.frontend import ALL_GOOD, FrontendBuiltinSimulator, colour_name
from colbench.simulators.vision import VisionEndpointSimulator, build_vision_messages, frontend_request
from colbench.tasks.spec import TaskSpec

CDN = '<link href="https://cdn.jsdelivr.net/npm/tailwindcss@2.2.19/dist/tailwind.min.css" rel="stylesheet">'

REFERENCE = f"""<html><head>{CDN}</head><body class="bg-gray-100">
<header class="bg-blue-800 text-white p-6 flex justify-between items-center">
  <h1 class="text-3xl font-bold">Acme Bakery</h1>
  <nav class="space-x-4"><a href="#">Home</a><a href="#">Menu</a><a href="#">Contact</a></nav>
</header>
<main class="container mx-auto p-8">
  <section class="grid grid-cols-3 gap-6">
    <div class="bg-white rounded shadow p-4"><h2 class="text-xl">Sourdough bread</h2><p>Baked fresh every \
morning.</p></div>
    <div class="bg-white rounded shadow p-4"><h2 class="text-xl">Birthday cakes</h2><p>Made to order for \
parties.</p></div>
    <div class="bg-white rounded shadow p-4"><h2 class="text-xl">Espresso bar</h2><p>Coffee from local \
roasters.</p></div>
  </section>
  <section class="mt-8 bg-yellow-200 p-6"><h2 class="text-2xl">Order online today</h2>
    <button class="bg-red-500 text-white px-4 py-2 rounded">Order now</button></section>
</main>
<footer class="bg-gray-800 text-gray-300 p-4 text-center">Acme Bakery, 1 Main Street</footer>
</body></html>"""


def variant(*edits: tuple[str, str]) -> str:
    page = REFERENCE
    for old, new in edits:
        assert old in page, old
        page = page.replace(old, new)
    return page


VARIANTS = {
    "same": variant(),
    "white_header": variant(("bg-blue-800 text-white p-6", "bg-white text-gray-900 p-6")),
    "stacked": variant(("grid grid-cols-3 gap-6", "grid grid-cols-1 gap-6")),
    "no_cta": variant((re.search(r'<section class="mt-8.*?</section>', REFERENCE, re.S).group(0), "")),
    "green_button": variant(("bg-red-500 text-white px-4", "bg-green-600 text-white px-4")),
    "small_title": variant(("text-3xl font-bold", "text-base font-bold")),
    "footer_first": variant(
        ('<footer class="bg-gray-800 text-gray-300 p-4 text-center">Acme Bakery, 1 Main Street</footer>', ""),
        ('<body class="bg-gray-100">',
         '<body class="bg-gray-100"><footer class="bg-gray-800 text-gray-300 p-4 text-center">'
         "Acme Bakery, 1 Main Street</footer>"),
    ),
}

TASK = TaskSpec(family="frontend", problem_description="A website for a small bakery called Acme.",
                ground_truth=REFERENCE)


@pytest.fixture(scope="module")
def renders():
    names = ["reference"] + list(VARIANTS)
    with Renderer(pool_size=2) as renderer:
        results = renderer.render_many([REFERENCE] + list(VARIANTS.values()))
    assert all(r.ok for r in results), [r.error for r in results]
    return dict(zip(names, results))


def builtin_reply(renders, name: str | None) -> str:
    agent = renders[name] if name else None
    request = frontend_request(TASK, [{"role": "user", "content": "Build my bakery site."}], agent,
                               renders["reference"])
    [reply] = FrontendBuiltinSimulator().reply([request])
    assert reply.error is None and reply.text
    assert len(reply.text) <= family("frontend").reply_limit
    for leak in ("<", ">", "class", "bg-", "text-3xl", "grid-cols", "tailwind", "#"):
        assert leak not in reply.text, (leak, reply.text)
    return reply.text


def test_colour_names_are_everyday_words():
    assert colour_name([30, 64, 175]) == "dark blue"
    assert colour_name([59, 130, 246]) == "blue"
    assert colour_name([239, 68, 68]) == "red"
    assert colour_name([253, 230, 138]) == "light yellow"
    assert colour_name([255, 255, 255]) == "white"
    assert colour_name([31, 41, 55]) == "dark grey"
    assert colour_name([22, 163, 74]) == "green"


def test_builtin_says_nothing_is_wrong_with_the_same_page(renders):
    assert builtin_reply(renders, "same") == ALL_GOOD


@pytest.mark.parametrize("name, expected", [
    ("white_header", ["'Acme Bakery' header", "dark blue background, not white"]),
    ("stacked", ["3 items side by side"]),
    ("no_cta", ["missing", "light yellow", "'Order online today'"]),
    ("green_button", ["'Order now' button should be red, not green"]),
    ("small_title", ["'Acme Bakery' should be bigger, about 30px"]),
    ("footer_first", ["should come before the footer"]),
])
def test_builtin_names_the_main_difference(renders, name, expected):
    text = builtin_reply(renders, name)
    for phrase in expected:
        assert phrase in text, text


def test_builtin_is_deterministic_and_describes_the_page_when_there_is_none(renders):
    assert builtin_reply(renders, "white_header") == builtin_reply(renders, "white_header")
    text = builtin_reply(renders, None)
    assert text.startswith("I don't see a page from you yet")
    for phrase in ("dark blue header", "'Acme Bakery'", "3 items side by side", "'Order online today'", "footer"):
        assert phrase in text, text


def test_builtin_refuses_what_it_cannot_answer(renders):
    sim = make_simulator("builtin-frontend")
    assert isinstance(sim, FrontendBuiltinSimulator)
    backend = TaskSpec(family="backend", problem_description="x", ground_truth="def f(): pass")
    [a, b] = sim.reply([SimRequest(backend, []), SimRequest(TASK, [], medium="pages")])  # the second with no pages
    assert "compares pages" in a.error and "reference" in b.error


def test_vision_simulator_sends_both_screenshots(openai_server, renders):
    seen = []

    def responder(request):
        seen.append(request)
        return "Make the header dark blue. " * 60  # longer than the cut: returned raw

    openai_server.set_responder(responder)
    sim = make_simulator(f"vision:{openai_server.base_url}#qwen2-vl")
    assert isinstance(sim, VisionEndpointSimulator) and sim.ref.startswith("vision:")
    dialogue = [
        {"role": "user", "content": "Build my bakery site."},
        {"role": "assistant", "content": "Here it is. OUTPUT: " + VARIANTS["white_header"]},
    ]
    request = frontend_request(TASK, dialogue, renders["white_header"], renders["reference"])
    [reply] = sim.reply([request])
    sim.close()
    assert reply.error is None and len(reply.text) > family("frontend").reply_limit  # the env cuts it
    [body] = seen
    assert body["model"] == "qwen2-vl" and body["temperature"] == 0.0
    [message] = body["messages"]
    images = [p for p in message["content"] if p["type"] == "image_url"]
    texts = [p["text"] for p in message["content"] if p["type"] == "text"]
    assert len(images) == 2
    sent = [base64.b64decode(p["image_url"]["url"].split(",", 1)[1]) for p in images]
    assert sent == [renders["white_header"].png_bytes, renders["reference"].png_bytes]
    assert all(p["image_url"]["url"].startswith("data:image/png;base64,") for p in images)
    prompt = "\n".join(texts)
    assert TASK.problem_description in prompt and "Build my bakery site." in prompt
    assert "bg-white" not in prompt and "<html" not in prompt  # the agent's code is not shown


def test_vision_simulator_told_in_words_when_the_turn_showed_no_page(renders):
    # As officially: a turn without a page is described in words, and only the wanted page is shown.
    request = frontend_request(TASK, [], None, renders["reference"])
    content = build_vision_messages(request)[0]["content"]
    images = [p for p in content if p["type"] == "image_url"]
    assert len(images) == 1 and "did not show a page" in content[0]["text"]
    assert base64.b64decode(images[0]["image_url"]["url"].split(",", 1)[1]) == renders["reference"].png_bytes
    shown = build_vision_messages(frontend_request(TASK, [], renders["same"], renders["reference"]))[0]["content"]
    assert len([p for p in shown if p["type"] == "image_url"]) == 2 and "did not show a page" not in shown[0]["text"]


def test_vision_simulator_errors_become_replies(openai_server, renders):
    sim = VisionEndpointSimulator("m", openai_server.base_url, max_retries=0)
    openai_server.fail_next(1, 500)
    good = frontend_request(TASK, [], renders["same"], renders["reference"])
    backend = SimRequest(TaskSpec(family="backend", problem_description="x", ground_truth="y"), [])
    no_images = SimRequest(TASK, [], medium="pages", brief=good.brief)
    replies = sim.reply([good, backend, no_images])
    sim.close()
    assert all(r.error and not r.text for r in replies)
    assert "500" in replies[0].error and "reads pages; a backend task's human sees text" in replies[1].error
    assert "reference" in replies[2].error
    assert len(openai_server.chat_requests) == 1  # the bad requests never left


def test_default_similarity_ranks_real_renders_sensibly(renders):
    import io

    from PIL import Image

    from colbench.similarity import make_similarity

    sim = make_similarity(None)
    ref = renders["reference"].png_bytes
    buf = io.BytesIO()
    Image.new("RGB", (1280, 800), (255, 255, 255)).save(buf, "PNG")
    score = {name: sim.score(ref, renders[name].png_bytes) for name in VARIANTS}
    assert score["same"] == pytest.approx(1.0)
    assert 1.0 > score["green_button"] > score["white_header"] > score["no_cta"] > score["stacked"] > 0.3
    assert sim.score(ref, buf.getvalue()) < 0.05 and sim.score(ref, black_png()) < 0.05


def test_builtin_does_not_send_the_same_message_twice(renders):
    """The agent shows the same wrong page again: the human moves on, or says it still stands."""
    first = builtin_reply(renders, "no_cta")
    dialogue = [{"role": "user", "content": "Build my bakery site."}, {"role": "assistant", "content": "OUTPUT: ..."},
                {"role": "user", "content": first}, {"role": "assistant", "content": "OUTPUT: ..."}]
    [again] = FrontendBuiltinSimulator().reply([frontend_request(TASK, dialogue, renders["no_cta"],
                                                                 renders["reference"])])
    assert again.text and again.text != first and len(again.text) <= family("frontend").reply_limit
    assert again.text.startswith("That is still as I described") or not any(
        p in again.text for p in first.split(". ")[1:] if p
    )


def test_a_navigation_bar_reads_as_words_not_glued_text(renders):
    nav = next(s for s in renders["reference"].dom_summary["sections"] if "Home" in s["text"])
    assert "Home Menu Contact" in nav["text"]  # the links are written without spaces between them
