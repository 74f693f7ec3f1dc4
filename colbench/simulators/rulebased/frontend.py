"""A deterministic frontend simulated human for CPU runs and CI.

STAND-IN ONLY. The paper's frontend human is a vision-language model (Qwen2-VL-72B)
looking at two screenshots; numbers measured against this one are not comparable to
the paper's. It lets frontend rollouts, rewards and training run end to end,
reproducibly, with no model.

What it reads: the two DOM summaries the renderer took from the rendered pages
(``SimRequest.dom = {"agent": ..., "reference": ...}``, see ``colbench.render.dom``):
sections with their boxes and colours, text runs with font sizes and colours, buttons
and links, pictures. It never sees or repeats HTML: everything it says is what a person
looking at the two pages could say (colours by approximate name, positions, sizes,
visible text).

How it answers:
1. Sections are matched reference-to-agent by shared words, kind (header, footer, ...)
   and vertical position; unmatched reference sections are "missing", unmatched agent
   sections "extra", and matched ones out of order are reported as such.
2. Matched sections are compared: background and text colour, number of columns, full
   width or not, height.
3. Texts are compared: reference text the agent's page lacks (headings and buttons
   first), font sizes and colours of text both pages share, button colours.
4. Every difference gets a priority (what a person notices first: missing sections,
   layout, big colour areas, then sizes and wording); the reply lists the top ones in
   that order, within the 1000-character limit.
When the agent has shown no page (or it failed to render), it describes the reference
page instead, top to bottom.
"""
from __future__ import annotations

import colorsys
import re
import time
from dataclasses import dataclass

from colbench.simulators.base import SimReply, SimRequest, Simulator

REPLY_BUDGET = 960  # the environment cuts frontend replies at 1000 characters
MAX_POINTS = 6

NO_BACKEND = "the built-in frontend simulator compares pages: it answers tasks whose human sees pages only"
NO_REFERENCE = "frontend request carries no reference DOM summary (SimRequest.dom['reference'])"
ALL_GOOD = "That looks just like what I had in mind. Thank you!"


# -- colours -------------------------------------------------------------------------------


def _lightness(r: float, g: float, b: float) -> float:
    """CIE L* (0-100): perceived lightness, so a saturated green is not called dark."""
    def linear(c: float) -> float:
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4

    y = 0.2126 * linear(r) + 0.7152 * linear(g) + 0.0722 * linear(b)
    return 116 * y ** (1 / 3) - 16 if y > 0.008856 else 903.3 * y


def colour_name(rgb: list[int] | tuple[int, int, int] | None) -> str:
    """An approximate everyday name: "dark blue", "light grey", "white"."""
    if rgb is None:
        return "transparent"
    r, g, b = (max(0, min(255, int(c))) / 255.0 for c in rgb[:3])
    hue = colorsys.rgb_to_hls(r, g, b)[0] * 360
    light = _lightness(r, g, b)
    chroma = max(r, g, b) - min(r, g, b)
    if chroma < 0.1:  # Tailwind's greys are slightly blue; they still read as grey
        for limit, name in ((98, "white"), (90, "very light grey"), (75, "light grey"), (45, "grey"),
                            (12, "dark grey")):
            if light > limit:
                return name
        return "black"
    name = next(name for limit, name in ((15, "red"), (40, "orange"), (65, "yellow"), (170, "green"), (195, "teal"),
                                         (232, "blue"), (255, "indigo"), (295, "purple"), (345, "pink"), (361, "red"))
                if hue < limit)
    if light >= 92:
        return f"pale {name}"
    if light >= 78:
        return f"light {name}"
    if light < 40:
        return f"dark {name}"
    return name


def colours_differ(a, b, threshold: float = 48.0) -> bool:
    """Different enough that a person would say so: another name and a visible distance."""
    if a is None or b is None:
        return (a is None) != (b is None)
    distance = sum((int(x) - int(y)) ** 2 for x, y in zip(a, b)) ** 0.5
    return distance > threshold and colour_name(a) != colour_name(b)


# -- text helpers ----------------------------------------------------------------------------

_WORD = re.compile(r"[a-z0-9]+")


def _words(text: str) -> set[str]:
    return set(_WORD.findall((text or "").lower()))


def _norm(text: str) -> str:
    return " ".join(_WORD.findall((text or "").lower()))


def _quote(text: str, limit: int = 40) -> str:
    text = " ".join((text or "").split())
    return f"'{text if len(text) <= limit else text[: limit - 3].rstrip() + '...'}'"


KIND = {"header": "header", "nav": "navigation bar", "footer": "footer", "form": "form", "aside": "sidebar"}


def _kind(section: dict) -> str:
    return KIND.get(section.get("tag", ""), "section")


def _label(section: dict) -> str:
    """How a person refers to a section: its heading, else its kind."""
    kind = _kind(section)
    if section.get("headings"):
        return f"the {_quote(section['headings'][0])} {kind}"
    if kind != "section":
        return f"the {kind}"
    return f"the {_quote(section.get('text', ''), 30)} section" if section.get("text") else "that section"


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


def _bg_phrase(section: dict) -> str:
    bg = section.get("background")
    return "" if bg is None else colour_name(bg) + " "


# -- matching --------------------------------------------------------------------------------


def _section_score(ref: dict, agent: dict, ref_page_h: float, agent_page_h: float) -> float:
    rw, aw = _words(ref.get("text", "")), _words(agent.get("text", ""))
    if rw or aw:
        score = len(rw & aw) / max(1, len(rw | aw))
    else:
        score = 0.3
    if ref.get("tag") == agent.get("tag") and ref.get("tag") in KIND:
        score += 0.3
    ry = ref["box"][1] / max(1.0, ref_page_h)
    ay = agent["box"][1] / max(1.0, agent_page_h)
    score += 0.2 * (1 - min(1.0, abs(ry - ay)))
    return score


def match_sections(ref: list[dict], agent: list[dict], ref_h: float, agent_h: float,
                   threshold: float = 0.35) -> dict[int, int]:
    """Greedy best-first matching, reference index -> agent index."""
    pairs = sorted(
        ((_section_score(r, a, ref_h, agent_h), i, j) for i, r in enumerate(ref) for j, a in enumerate(agent)),
        key=lambda t: (-t[0], t[1], t[2]),
    )
    matched: dict[int, int] = {}
    used: set[int] = set()
    for score, i, j in pairs:
        if score < threshold:
            break
        if i not in matched and j not in used:
            matched[i] = j
            used.add(j)
    return matched


@dataclass
class Point:
    priority: float
    order: float  # position on the reference page, for a stable top-to-bottom tie-break
    text: str


# -- the comparison --------------------------------------------------------------------------


def compare(ref: dict, agent: dict) -> list[Point]:
    points: list[Point] = []
    ref_h, agent_h = float(ref.get("height") or 800), float(agent.get("height") or 800)
    rs, as_ = ref.get("sections") or [], agent.get("sections") or []
    matched = match_sections(rs, as_, ref_h, agent_h)

    # The page as a whole.
    if colours_differ(ref.get("background"), agent.get("background")):
        points.append(Point(8, 0, f"The page background should be {colour_name(ref['background'])}, "
                                  f"not {colour_name(agent['background'])}."))

    # Missing and extra sections, and their order.
    for i, section in enumerate(rs):
        if i in matched:
            continue
        before = next((rs[k] for k in range(i - 1, -1, -1) if k in matched), None)
        where = "at the top" if i == 0 else "at the bottom" if i == len(rs) - 1 else (
            f"after {_label(before)}" if before else "near the top")
        what = f"a {_bg_phrase(section)}{_kind(section)}"
        detail = ""
        if section.get("headings"):
            detail = f" titled {_quote(section['headings'][0])}"
        elif section.get("text"):
            detail = f" with {_quote(section['text'])}"
        if section.get("columns", 1) > 1:
            detail += f", {section['columns']} items side by side"
        area = section["box"][2] * section["box"][3] / max(1.0, 1280 * ref_h)
        points.append(Point(10 + 4 * area, section["box"][1], f"I'm missing {what}{detail} {where}."))
    used = set(matched.values())
    for j, section in enumerate(as_):
        if j not in used:
            points.append(Point(6, 1e6 + j, f"Please remove {_label(section)}; I don't want it."))
    order = sorted(matched.items())
    for (i1, j1), (i2, j2) in zip(order, order[1:]):
        if j2 < j1:
            points.append(Point(8.5, rs[i2]["box"][1],
                                f"{_cap(_label(rs[i1]))} should come before {_label(rs[i2])}."))
            break

    # Matched sections: colours and layout.
    recoloured: set[int] = set()  # sections whose text colour is already mentioned
    for i, j in matched.items():
        r, a = rs[i], as_[j]
        label = _label(r)
        area = r["box"][2] * r["box"][3] / max(1.0, 1280 * ref_h)
        if colours_differ(r.get("background"), a.get("background")):
            points.append(Point(7 + 3 * area, r["box"][1],
                                f"{_cap(label)} should have a {colour_name(r['background'])} background, "
                                f"not {colour_name(a['background'])}."))
        if colours_differ(r.get("color"), a.get("color")):
            recoloured.add(i)
            points.append(Point(5, r["box"][1], f"The text in {label} should be {colour_name(r['color'])}."))
        rc, ac = r.get("columns", 1), a.get("columns", 1)
        if rc != ac:
            layout = f"{rc} items side by side in a row" if rc > 1 else "its items stacked one above the other"
            points.append(Point(7.5, r["box"][1], f"{_cap(label)} should show {layout} (yours has {ac})."))
        if r["box"][2] >= 1200 and a["box"][2] < 1000:
            points.append(Point(4, r["box"][1], f"{_cap(label)} should span the full width of the page."))
        elif r["box"][2] < 1000 and a["box"][2] >= 1200 and r["box"][2] > 0:
            points.append(Point(3.5, r["box"][1], f"{_cap(label)} should be narrower, about "
                                                  f"{r['box'][2]} pixels wide, not the full width."))
        rh, ah = max(1, r["box"][3]), max(1, a["box"][3])
        if rh / ah > 1.8 or ah / rh > 1.8:
            size = "taller" if rh > ah else "shorter"
            points.append(Point(3, r["box"][1], f"{_cap(label)} should be much {size} "
                                                f"(about {rh} pixels high, yours is {ah})."))

    # Texts: what is missing, and how shared texts look.
    agent_texts = agent.get("texts") or []
    agent_by_text: dict[str, dict] = {}
    for t in agent_texts:
        agent_by_text.setdefault(_norm(t["text"]), t)
    agent_all = " " + " ".join(_norm(t["text"]) for t in agent_texts) + " "
    missing_sections = {i for i in range(len(rs)) if i not in matched}
    missing_texts = []
    for t in ref.get("texts") or []:
        key = _norm(t["text"])
        if not key:
            continue
        mine = agent_by_text.get(key)
        if mine is None:
            if f" {key} " not in agent_all and t.get("section", -1) not in missing_sections:
                missing_texts.append(t)
            continue
        name = _quote(t["text"], 30)
        rsz, asz = t.get("font_size", 16), mine.get("font_size", 16)
        if abs(rsz - asz) >= max(4, 0.25 * rsz):
            bigger = "bigger" if rsz > asz else "smaller"
            points.append(Point(4 + min(2, rsz / 24), t["box"][1],
                                f"The text {name} should be {bigger}, about {rsz}px (yours is {asz}px)."))
        if colours_differ(t.get("color"), mine.get("color")) and t.get("section", -1) not in recoloured:
            recoloured.add(t.get("section", -1))  # one text-colour remark per section is enough
            points.append(Point(3.5, t["box"][1], f"The text {name} should be {colour_name(t['color'])}, "
                                                  f"not {colour_name(mine.get('color'))}."))
        if bool(t.get("bold")) != bool(mine.get("bold")):
            points.append(Point(2, t["box"][1], f"The text {name} should {'' if t.get('bold') else 'not '}be bold."))
    # Headings and big text first, then the rest, top to bottom.
    missing_texts.sort(key=lambda t: (-t.get("font_size", 16), t["box"][1]))
    for t in missing_texts[:4]:
        points.append(Point(5 + min(2, t.get("font_size", 16) / 24), t["box"][1],
                            f"Add the text {_quote(t['text'], 60)}."))
    ref_words = _words(" ".join(t["text"] for t in ref.get("texts") or []))
    extra = [t for t in agent_texts if _words(t["text"]) and not (_words(t["text"]) & ref_words)]
    if extra:
        points.append(Point(2.5, 1e6, f"I didn't ask for the text {_quote(extra[0]['text'])}."))

    # Buttons and links with the same text: their colours.
    # Only controls with a colour of their own: a plain link just shows its section's colour.
    agent_controls = {_norm(c["text"]): c for c in agent.get("controls") or [] if c.get("text")}
    for c in ref.get("controls") or []:
        mine = agent_controls.get(_norm(c.get("text", "")))
        section_bg = rs[c["section"]].get("background") if 0 <= c.get("section", -1) < len(rs) else None
        if not colours_differ(c.get("background"), section_bg):
            continue
        if mine and colours_differ(c.get("background"), mine.get("background")):
            points.append(Point(5, c["box"][1],
                                f"The {_quote(c['text'], 30)} {'button' if c['tag'] != 'a' else 'link'} "
                                                f"should be {colour_name(c['background'])}, "
                                                f"not {colour_name(mine['background'])}."))

    # Pictures: a person notices missing or extra images.
    ri, ai = len(ref.get("images") or []), len(agent.get("images") or [])
    if ri != ai:
        points.append(Point(4, 5e5, f"I want {ri} picture{'s' if ri != 1 else ''} on the page, yours has {ai}."))

    # Page length, when nothing more specific explains it.
    if ref_h / agent_h > 1.5 or agent_h / ref_h > 1.5:
        points.append(Point(2, 1e6, f"Overall the page should be {'longer' if ref_h > agent_h else 'shorter'}, "
                                    f"about {int(ref_h)} pixels tall (yours is {int(agent_h)})."))
    return points


def describe(ref: dict) -> str:
    """The reference page in words, top to bottom (for when there is no page to compare)."""
    parts = []
    sections = ref.get("sections") or []
    for s in sections[:6]:
        piece = f"a {_bg_phrase(s)}{_kind(s)}"
        if s.get("headings"):
            piece += f" titled {_quote(s['headings'][0])}"
        elif s.get("text"):
            piece += f" with {_quote(s['text'])}"
        if s.get("color"):
            piece += f" ({colour_name(s['color'])} text)"
        if s.get("columns", 1) > 1:
            piece += f" showing {s['columns']} items side by side"
        parts.append(piece)
    if not parts:
        return "I'd like a simple page; I don't see anything from you yet."
    text = "I don't see a page from you yet. What I want, from top to bottom: " + "; then ".join(parts) + "."
    if ref.get("background"):
        text += f" The page background is {colour_name(ref['background'])}."
    return text


def compose(points: list[Point], budget: int = REPLY_BUDGET) -> str:
    if not points:
        return ALL_GOOD
    chosen: list[Point] = []
    ranked = sorted(points, key=lambda p: (-round(p.priority, 3), p.order, p.text))
    intro = "A few things are different from what I have in mind."
    used = len(intro)
    for p in ranked:
        if len(chosen) >= MAX_POINTS:
            break
        if used + 1 + len(p.text) > budget:
            continue
        chosen.append(p)
        used += 1 + len(p.text)
    return " ".join([intro] + [p.text for p in chosen])


def _last_reply(dialogue) -> str | None:
    """The human's previous reply (not the task description), if any."""
    replies = [m["content"] for m in dialogue[1:] if m["role"] == "user"]
    return replies[-1] if replies else None


class FrontendBuiltinSimulator(Simulator):
    ref = "builtin-frontend"

    def reply(self, requests: list[SimRequest]) -> list[SimReply]:
        return [self._reply_one(r) for r in requests]

    def _reply_one(self, request: SimRequest) -> SimReply:
        start = time.monotonic()
        if request.medium != "pages":
            return SimReply(text="", error=NO_BACKEND)
        dom = request.dom or {}
        ref = dom.get("reference")
        if not ref:
            return SimReply(text="", error=NO_REFERENCE)
        agent = dom.get("agent")
        if not agent or not agent.get("sections") and not agent.get("texts"):
            text = describe(ref)
        else:
            points = compare(ref, agent)
            text = compose(points)
            said = _last_reply(request.dialogue)
            if said is not None and text == said and text != ALL_GOOD:
                # The page has not changed where it matters: a person moves on to what they have not said yet,
                # or says that it still stands, rather than sending the same message again.
                unsaid = [p for p in points if p.text not in said]
                text = (
                    compose(unsaid)
                    if unsaid
                    else "That is still as I described: "
                    + text[len("A few things are different from what I have in mind. ") :]
                )
        return SimReply(text=text[:REPLY_BUDGET + 40], latency_s=time.monotonic() - start)
