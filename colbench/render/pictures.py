"""Pages in one labelled picture, for people: the agent's page beside the reference
(`colbench inspect --side-by-side`), or every page a dialogue showed, turn by turn
(`--filmstrip`). A missing page is a grey placeholder that says so, never a black image
that could be taken for a page that rendered black."""
from __future__ import annotations

import io
import textwrap

GROUND = (96, 96, 96)
INK = (255, 255, 255)
NO_PAGE = (225, 225, 225)


def _font(size: int):
    from PIL import ImageFont

    return ImageFont.load_default(size=size)  # Pillow's own scalable font: no font file needed


def _image(png: bytes):
    from PIL import Image

    return Image.open(io.BytesIO(png)).convert("RGB")


def placeholder(width: int, height: int, text: str):
    """A light grey frame saying why there is no page."""
    from PIL import Image, ImageDraw

    frame = Image.new("RGB", (width, height), NO_PAGE)
    draw = ImageDraw.Draw(frame)
    font = _font(max(16, width // 24))
    box = draw.multiline_textbbox((0, 0), text, font=font)
    draw.multiline_text(((width - box[2]) / 2, (height - box[3]) / 2), text, fill=(80, 80, 80), font=font,
                        align="center")
    return frame


def contact_sheet(frames: list[tuple[str, bytes | None]], *, title: str | None = None, frame_width: int | None = None,
                  gap: int = 16, label_size: int = 20) -> bytes:
    """One PNG: the frames left to right, each under its label, top-aligned on a grey ground, under
    an optional title (wrapped). A frame without a PNG is a placeholder. ``frame_width`` scales every
    frame to that width (a filmstrip); by default frames keep their size."""
    from PIL import Image, ImageDraw

    images = [_image(png) if png is not None else None for _, png in frames]
    known = [im for im in images if im is not None]
    width = frame_width or (known[0].width if known else 640)
    shown = []
    for (label, _), im in zip(frames, images):
        if im is None:
            im = placeholder(width, int(width * 0.625), "no page\n(the agent showed none)")
        elif frame_width:
            im = im.resize((frame_width, max(1, round(im.height * frame_width / im.width))))
        shown.append((label, im))
    label_band = label_size + 12
    title_lines = (
        textwrap.wrap(title, width=max(40, sum(im.width for _, im in shown) // (label_size // 2 + 1))) if title else []
    )
    title_band = (label_size + 10) * len(title_lines) + (10 if title_lines else 0)
    canvas = Image.new("RGB", (sum(im.width for _, im in shown) + gap * (len(shown) - 1),
                               title_band + label_band + max(im.height for _, im in shown)), GROUND)
    draw = ImageDraw.Draw(canvas)
    for n, line in enumerate(title_lines):
        draw.text((10, 8 + n * (label_size + 10)), line, fill=INK, font=_font(label_size + 2))
    x = 0
    for label, im in shown:
        draw.text((x + 8, title_band + 6), label, fill=INK, font=_font(label_size))
        canvas.paste(im, (x, title_band + label_band))
        x += im.width + gap
    buffer = io.BytesIO()
    canvas.save(buffer, format="PNG")
    return buffer.getvalue()


def side_by_side(left_png: bytes | None, right_png: bytes, *, title: str | None = None,
                 labels: tuple[str, str] = ("agent", "reference"), gap: int = 16) -> bytes:
    """The agent's page (or a placeholder) beside the reference page."""
    return contact_sheet([(labels[0], left_png), (labels[1], right_png)], title=title, gap=gap)
