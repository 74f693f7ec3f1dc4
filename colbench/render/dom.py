"""What a person sees on a rendered page, as data: the DOM summary.

Computed in the browser (``page.evaluate(DOM_SUMMARY_JS)``) from the laid-out DOM, so it
reflects Tailwind's styles, not the HTML source. The built-in frontend simulator compares
two of these; nothing in it is HTML, so it can be shown to a simulator freely.

Shape (all numbers in CSS pixels, colours as ``[r, g, b]``; ``null`` when transparent)::

    {
      "width": 1280, "height": 1830,            # the document's size
      "background": [255, 255, 255],            # the page's effective background
      "title": "...",
      "sections": [                             # top-level layout blocks, top to bottom
        {"tag": "header", "name": "header", "box": [x, y, w, h],
         "background": [30, 58, 138], "color": [255, 255, 255],
         "columns": 3,                          # children side by side (1 = stacked)
         "text": "first 300 chars of visible text", "headings": ["..."]}
      ],
      "texts": [                                # visible text runs in reading order
        {"tag": "h1", "text": "...", "box": [...], "font_size": 36, "bold": true,
         "color": [...], "background": [...], "section": 0}
      ],
      "images": [{"box": [...], "section": 0}],
      "controls": [{"tag": "button", "text": "Sign up", "box": [...],
                    "background": [...], "color": [...], "section": 2}]
    }
"""
from __future__ import annotations

DOM_SUMMARY_JS = r"""
() => {
  const MAX_TEXTS = 200, MAX_SECTIONS = 30;
  const rgb = (s) => {
    const m = /rgba?\(([^)]+)\)/.exec(s || "");
    if (!m) return null;
    const p = m[1].split(/[ ,/]+/).filter(Boolean).map(Number);
    if (p.length >= 4 && p[3] < 0.1) return null;   // (nearly) transparent
    return [Math.round(p[0]), Math.round(p[1]), Math.round(p[2])];
  };
  const box = (el) => {
    const r = el.getBoundingClientRect();
    return [Math.round(r.left + scrollX), Math.round(r.top + scrollY), Math.round(r.width), Math.round(r.height)];
  };
  const visible = (el) => {
    const s = getComputedStyle(el);
    if (s.display === "none" || s.visibility === "hidden" || Number(s.opacity) === 0) return false;
    const r = el.getBoundingClientRect();
    return r.width > 1 && r.height > 1;
  };
  // The colour actually behind an element: its own background or its nearest ancestor's.
  const effectiveBg = (el) => {
    for (let e = el; e && e.nodeType === 1; e = e.parentElement) {
      const c = rgb(getComputedStyle(e).backgroundColor);
      if (c) return c;
      if (getComputedStyle(e).backgroundImage !== "none") return null;  // gradient/picture
    }
    return [255, 255, 255];
  };
  const clean = (t) => (t || "").replace(/\s+/g, " ").trim();
  // A section's visible text with a space between text nodes: innerText glues inline
  // siblings written without whitespace (<a>Home</a><a>Menu</a> reads "HomeMenu").
  const spacedText = (root) => {
    const parts = [];
    const nodes = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
    for (let n = nodes.nextNode(); n; n = nodes.nextNode()) {
      const parent = n.parentElement;
      if (parent && !["SCRIPT", "STYLE", "NOSCRIPT", "TEMPLATE"].includes(parent.tagName) && visible(parent)) parts.push(n.textContent);
    }
    return clean(parts.join(" "));
  };
  const body = document.body;
  if (!body) return null;
  const doc = document.documentElement;
  const result = {
    width: Math.max(doc.scrollWidth, body.scrollWidth),
    height: Math.max(doc.scrollHeight, body.scrollHeight),
    background: effectiveBg(body),
    title: clean(document.title),
    sections: [], texts: [], images: [], controls: [],
  };
  // Sections: descend from <body> through lone wrappers (a single visible child taking the
  // whole box) and containers, stopping at semantic blocks or at a level with several blocks.
  const SEMANTIC = new Set(["HEADER", "NAV", "MAIN", "SECTION", "FOOTER", "ASIDE", "ARTICLE", "FORM"]);
  const blockKids = (el) => Array.from(el.children).filter((c) =>
      !["SCRIPT", "STYLE", "LINK", "META", "NOSCRIPT", "TEMPLATE"].includes(c.tagName) && visible(c));
  const sections = [];
  const collect = (el, depth) => {
    const kids = blockKids(el);
    // A lone page wrapper (a container div, <main> around everything) is not a section.
    if (depth < 5 && kids.length === 1 && !["HEADER", "NAV", "FOOTER"].includes(kids[0].tagName)
        && blockKids(kids[0]).length >= 1) {
      collect(kids[0], depth + 1);
      return;
    }
    for (const k of kids) {
      const grand = blockKids(k);
      const wraps = grand.length > 1 && (k.tagName === "MAIN" ||
          (!SEMANTIC.has(k.tagName) && grand.some((g) => SEMANTIC.has(g.tagName))));
      if (depth < 5 && wraps) collect(k, depth + 1);
      else sections.push(k);
    }
  };
  collect(body, 0);
  const columnsOf = (el) => {
    // Children whose boxes share a row: the largest number of kids with overlapping y ranges,
    // looking one level down when the section has a single inner container.
    let kids = blockKids(el);
    for (let i = 0; i < 3 && kids.length === 1; i++) kids = blockKids(kids[0]);
    let best = 1;
    for (const a of kids) {
      const ra = a.getBoundingClientRect();
      const row = kids.filter((b) => {
        const rb = b.getBoundingClientRect();
        return rb.top < ra.bottom - 2 && rb.bottom > ra.top + 2;
      }).length;
      best = Math.max(best, row);
    }
    return best;
  };
  const sectionEls = sections.slice(0, MAX_SECTIONS);
  for (const s of sectionEls) {
    const st = getComputedStyle(s);
    const headings = Array.from(s.querySelectorAll("h1,h2,h3,h4,h5,h6")).filter(visible)
        .map((h) => clean(h.innerText)).filter(Boolean).slice(0, 5);
    const name = s.getAttribute("aria-label") || s.id || (headings[0] || "") || s.tagName.toLowerCase();
    result.sections.push({
      tag: s.tagName.toLowerCase(), name: clean(name).slice(0, 80), box: box(s),
      background: effectiveBg(s), color: rgb(st.color), columns: columnsOf(s),
      text: spacedText(s).slice(0, 300), headings,
    });
  }
  const sectionOf = (el) => {
    for (let i = 0; i < sectionEls.length; i++) if (sectionEls[i].contains(el)) return i;
    return -1;
  };
  // Text runs: elements with their own non-empty text node, in document (reading) order.
  const walker = document.createTreeWalker(body, NodeFilter.SHOW_ELEMENT);
  for (let el = walker.currentNode; el && result.texts.length < MAX_TEXTS; el = walker.nextNode()) {
    if (["SCRIPT", "STYLE", "NOSCRIPT", "TEMPLATE"].includes(el.tagName)) continue;
    const own = clean(Array.from(el.childNodes).filter((n) => n.nodeType === 3).map((n) => n.textContent).join(" "));
    if (!own || !visible(el)) continue;
    const st = getComputedStyle(el);
    result.texts.push({
      tag: el.tagName.toLowerCase(), text: own.slice(0, 160), box: box(el),
      font_size: Math.round(parseFloat(st.fontSize) || 16), bold: Number(st.fontWeight) >= 600,
      color: rgb(st.color), background: effectiveBg(el), section: sectionOf(el),
    });
  }
  for (const img of Array.from(document.querySelectorAll("img,svg,video,picture")).filter(visible).slice(0, 50)) {
    result.images.push({box: box(img), section: sectionOf(img)});
  }
  const ctl = "button,a,input,select,textarea,[role=button]";
  for (const el of Array.from(document.querySelectorAll(ctl)).filter(visible).slice(0, 60)) {
    const st = getComputedStyle(el);
    result.controls.push({
      tag: el.tagName.toLowerCase(), text: clean(el.innerText || el.value || el.placeholder || "").slice(0, 60),
      box: box(el), background: effectiveBg(el), color: rgb(st.color), section: sectionOf(el),
    });
  }
  return result;
}
"""  # noqa: E501 (a line of the script above; the script is kept byte for byte)
