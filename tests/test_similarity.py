"""The frontend reward: the weight-free SSIM default and the CLIP code path (tiny random model)."""
from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image, ImageDraw

from colbench.render import black_png
from colbench.similarity import ClipSimilarity, SsimSimilarity, make_similarity, ssim


def png(im: Image.Image) -> bytes:
    buf = io.BytesIO()
    im.save(buf, "PNG")
    return buf.getvalue()


def page(button_x: int = 100, header=(30, 58, 138), height: int = 800, cards: int = 3) -> bytes:
    """A synthetic 1280-wide screenshot: a header, a row of cards, a button, some text lines."""
    im = Image.new("RGB", (1280, height), (255, 255, 255))
    d = ImageDraw.Draw(im)
    d.rectangle([0, 0, 1279, 90], fill=header)
    d.text((40, 35), "Acme Bakery", fill=(255, 255, 255))
    width = (1200 - 20 * (cards - 1)) // cards
    for k in range(cards):
        x = 40 + k * (width + 20)
        d.rectangle([x, 130, x + width, 400], fill=(243, 244, 246), outline=(200, 200, 200))
        for line in range(4):
            d.text((x + 16, 300 + 18 * line), f"card {k} line {line} text", fill=(40, 40, 40))
    d.rectangle([button_x, 460, button_x + 160, 510], fill=(239, 68, 68))
    d.text((button_x + 50, 478), "Order", fill=(255, 255, 255))
    return png(im)


@pytest.fixture(scope="module")
def sim():
    return SsimSimilarity()


def test_ssim_of_identical_pages_is_one(sim):
    a = page()
    assert sim.score(a, a) == pytest.approx(1.0)
    assert sim.name == "ssim-edges" and SsimSimilarity(edge_balance=False).name == "ssim"


def test_ssim_orders_differences_sensibly(sim):
    ref = page()
    moved = sim.score(ref, page(button_x=700))
    recoloured = sim.score(ref, page(header=(255, 255, 255)))
    stacked = sim.score(ref, page(cards=1))
    black = sim.score(ref, black_png())
    white = sim.score(ref, png(Image.new("RGB", (1280, 800), (255, 255, 255))))
    assert 0.9 < moved < 1.0  # a moved button: close, not equal
    assert recoloured < moved and stacked < moved
    assert black < 0.05  # the protocol's "nothing rendered"
    assert white < 0.05  # a blank page: no content, whatever the background agrees on
    for score in (moved, recoloured, stacked, black, white):
        assert 0.0 <= score <= 1.0
    # Why the edge balance: plain SSIM rates the blank page above a recoloured header.
    plain = SsimSimilarity(edge_balance=False)
    blank = png(Image.new("RGB", (1280, 800), (255, 255, 255)))
    assert plain.score(ref, blank) > 0.8 > plain.score(ref, black_png())
    assert sim.score(blank, blank) == pytest.approx(1.0)


def test_ssim_is_symmetric_and_handles_different_sizes(sim):
    ref, long_page = page(), page(height=1600)
    assert sim.score(ref, long_page) == pytest.approx(sim.score(long_page, ref))
    assert sim.score(ref, long_page) < 0.8  # the extra half is black padding against content
    assert sim.score(page(height=400), ref) < 1.0
    small = png(Image.open(io.BytesIO(ref)).resize((640, 400)))
    assert sim.score(ref, small) > 0.8  # scale does not matter much: both become 320 wide


def test_ssim_matches_the_textbook_values():
    rng = np.random.default_rng(0)
    x = rng.random((64, 64))
    assert ssim(x, x) == pytest.approx(1.0)
    assert ssim(x, 1 - x) < 0  # anti-correlated structure
    assert ssim(np.zeros((32, 32)), np.ones((32, 32))) == pytest.approx(0.0, abs=1e-3)


@pytest.fixture(scope="module")
def tiny_clip(tmp_path_factory):
    """A CLIP model with a random-initialised tiny config, saved like real weights."""
    import torch
    from transformers import CLIPConfig, CLIPImageProcessor, CLIPModel

    torch.manual_seed(0)
    config = CLIPConfig(
        text_config=dict(hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
                         vocab_size=64, max_position_embeddings=16, bos_token_id=0, eos_token_id=1,
                         pad_token_id=1),
        vision_config=dict(hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
                           image_size=32, patch_size=8),
        projection_dim=8,
    )
    folder = tmp_path_factory.mktemp("tiny-clip")
    CLIPModel(config).save_pretrained(folder)
    CLIPImageProcessor(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32}).save_pretrained(folder)
    return str(folder)


def test_clip_path_with_a_tiny_random_model(tiny_clip):
    clip = make_similarity(tiny_clip, local_files_only=True)
    assert isinstance(clip, ClipSimilarity) and clip.name == f"clip:{tiny_clip}"
    ref, other = page(), page(header=(250, 204, 21), cards=1)
    assert clip.score(ref, ref) == pytest.approx(1.0, abs=1e-5)
    score = clip.score(ref, other)
    assert 0.0 <= score <= 1.0
    assert score == pytest.approx(clip.score(other, ref), abs=1e-6)
    emb = clip.embed([ref, other, black_png()])
    assert emb.shape == (3, 8)
    assert np.allclose(np.linalg.norm(emb, axis=1), 1.0, atol=1e-5)


def test_make_similarity_defaults_to_ssim_never_clip():
    default = make_similarity(None)
    assert isinstance(default, SsimSimilarity) and default.name == "ssim-edges"
    assert "clip" not in make_similarity("").name
