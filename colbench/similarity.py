"""How close a rendered page is to the reference page: the frontend reward.

Two metrics behind one interface, ``score(png_a, png_b) -> float in [0, 1]`` and ``name``:

- ``ClipSimilarity`` (name ``"clip:<model>"``): the paper's metric, the cosine of CLIP
  image embeddings (ViT-B/32, transformers ``CLIPModel``). Used only when the user gives
  weights (``--clip PATH_OR_ID``): no package ships CLIP weights and nothing may be
  downloaded at run time here. Negative cosines (never seen with real weights) clip to 0.
- ``SsimSimilarity`` (name ``"ssim-edges"``), the weight-free default. NOT CLIP, and
  every output names it ``ssim-edges``. Definition:
    1. both screenshots are scaled to ``width`` (320) pixels wide, keeping aspect ratio;
    2. the shorter one is padded at the bottom with BLACK to the taller one's height
       (the protocol's colour for "nothing rendered"), capped at ``max_height``, so a page
       that stops early is penalised where the reference still has content;
    3. SSIM (Wang et al. 2004; 7x7 uniform window, K1=0.01, K2=0.03, data range 1) is
       computed on each of the R, G and B channels, so colour changes count, not only
       luminance; the mean over channels and windows is clipped to [0, 1];
    4. times the square root of the EDGE BALANCE: min/max of the two pages' edge amounts
       (summed absolute grey-level differences between neighbouring pixels, per column).
  Why step 4: plain SSIM gives a blank white page 0.71 against a typical reference,
  more than a faithful page with one section out of place (0.62), because the flat
  background agrees everywhere. That would reward an agent for writing nothing. With the
  balance a blank page scores 0 and pages with the right amount of content keep their
  SSIM. Measured on real renders of a bakery page (tests/test_frontend_simulators.py's
  variants): identical 1.000, another button colour 0.991, white header instead of dark
  blue 0.863, a missing section 0.728, smaller title (everything below shifts) 0.691,
  cards stacked instead of side by side 0.627, footer moved to the top 0.514, the page
  without any stylesheet 0.445, blank 0.000, black 0.000. SSIM is pixel-aligned, so
  vertical shifts cost more than a person would think; CLIP, when weights exist, is the
  metric for paper numbers. ``SsimSimilarity(edge_balance=False)`` is plain SSIM
  (name ``"ssim"``).

``make_similarity(clip)`` picks one: CLIP when ``clip`` names weights, else ssim-edges.
"""
from __future__ import annotations

import io
from abc import ABC, abstractmethod

import numpy as np


class Similarity(ABC):
    #: Stored and printed with every reward, e.g. "ssim" or "clip:openai/clip-vit-base-patch32".
    name: str

    @abstractmethod
    def score(self, png_a: bytes, png_b: bytes) -> float:
        """Similarity in [0, 1]; 1 means the same picture. Symmetric."""

    def score_many(self, pairs: list[tuple[bytes, bytes]]) -> list[float]:
        return [self.score(a, b) for a, b in pairs]


def _load_rgb(png: bytes):
    from PIL import Image

    return Image.open(io.BytesIO(png)).convert("RGB")


# -- SSIM -----------------------------------------------------------------------------------


def _box_mean(x: np.ndarray, k: int) -> np.ndarray:
    """Mean over every k x k window ('valid' positions), via a summed-area table."""
    s = np.pad(x, ((1, 0), (1, 0)) + ((0, 0),) * (x.ndim - 2)).cumsum(0).cumsum(1)
    total = s[k:, k:] - s[:-k, k:] - s[k:, :-k] + s[:-k, :-k]
    return total / float(k * k)


def ssim(a: np.ndarray, b: np.ndarray, window: int = 7) -> float:
    """Mean SSIM of two float arrays in [0, 1] of the same shape (H, W) or (H, W, C)."""
    if a.shape != b.shape:
        raise ValueError(f"shapes differ: {a.shape} vs {b.shape}")
    if min(a.shape[0], a.shape[1]) < window:
        window = max(1, min(a.shape[0], a.shape[1]))
    c1, c2 = (0.01) ** 2, (0.03) ** 2
    a = a.astype(np.float64)
    b = b.astype(np.float64)
    mu_a, mu_b = _box_mean(a, window), _box_mean(b, window)
    # Sample (co)variances, as scikit-image does by default (N / (N - 1)).
    n = window * window
    cov_norm = n / (n - 1) if n > 1 else 1.0
    var_a = cov_norm * (_box_mean(a * a, window) - mu_a * mu_a)
    var_b = cov_norm * (_box_mean(b * b, window) - mu_b * mu_b)
    cov = cov_norm * (_box_mean(a * b, window) - mu_a * mu_b)
    num = (2 * mu_a * mu_b + c1) * (2 * cov + c2)
    den = (mu_a * mu_a + mu_b * mu_b + c1) * (var_a + var_b + c2)
    return float(np.mean(num / den))


def edge_amount(image: np.ndarray) -> float:
    """How much drawn content a page has: summed neighbour differences of its grey levels,
    per column of width (so the number does not depend on the scaled width much)."""
    grey = image.mean(axis=2) if image.ndim == 3 else image
    total = np.abs(np.diff(grey, axis=0)).sum() + np.abs(np.diff(grey, axis=1)).sum()
    return float(total) / grey.shape[1]


class SsimSimilarity(Similarity):
    def __init__(self, width: int = 320, max_height: int = 1000, window: int = 7, edge_balance: bool = True):
        self.width = width
        self.max_height = max_height  # in scaled pixels: 1000 at 320 wide = 4000 at 1280
        self.window = window
        self.edge_balance = edge_balance
        self.name = "ssim-edges" if edge_balance else "ssim"

    def _array(self, png: bytes) -> np.ndarray:
        from PIL import Image

        image = _load_rgb(png)
        height = max(1, round(image.height * self.width / image.width))
        image = image.resize((self.width, min(height, self.max_height)), Image.BILINEAR)
        return np.asarray(image, dtype=np.float64) / 255.0

    def score(self, png_a: bytes, png_b: bytes) -> float:
        a, b = self._array(png_a), self._array(png_b)
        balance = 1.0
        if self.edge_balance:
            ea, eb = edge_amount(a), edge_amount(b)
            balance = min(ea, eb) / max(ea, eb) if max(ea, eb) > 0 else 1.0  # two blank pages agree
        height = max(a.shape[0], b.shape[0])
        a = np.pad(a, ((0, height - a.shape[0]), (0, 0), (0, 0)))  # black below a short page
        b = np.pad(b, ((0, height - b.shape[0]), (0, 0), (0, 0)))
        return min(1.0, max(0.0, ssim(a, b, self.window))) * balance ** 0.5


# -- CLIP -------------------------------------------------------------------------------------


class ClipSimilarity(Similarity):
    """Cosine of CLIP image embeddings. ``path_or_id``: a local folder or a hub id.

    The folder must hold a ``CLIPModel`` and its image processor (``save_pretrained``
    of both). Loading never downloads when ``local_files_only`` is true.
    """

    def __init__(self, path_or_id: str, *, device: str = "cpu", local_files_only: bool = False):
        import torch
        from transformers import CLIPImageProcessor, CLIPModel

        self.path_or_id = path_or_id
        self.name = f"clip:{path_or_id}"
        self.device = device
        self._torch = torch
        self.model = CLIPModel.from_pretrained(path_or_id, local_files_only=local_files_only).to(device).eval()
        self.processor = CLIPImageProcessor.from_pretrained(path_or_id, local_files_only=local_files_only)
        self._cache: dict[int, np.ndarray] = {}  # the reference image is scored many times

    def embed(self, pngs: list[bytes]) -> np.ndarray:
        """Unit-length image embeddings, one row per PNG."""
        torch = self._torch
        images = [_load_rgb(png) for png in pngs]
        inputs = self.processor(images=images, return_tensors="pt")
        with torch.no_grad():
            out = self.model.get_image_features(pixel_values=inputs["pixel_values"].to(self.device))
        # transformers 5 may return a model output; its pooled output is the projection.
        features = out if isinstance(out, torch.Tensor) else out.pooler_output
        features = torch.nn.functional.normalize(features.float(), dim=-1)
        return features.cpu().numpy()

    def _embedding(self, png: bytes) -> np.ndarray:
        key = hash(png)
        if key not in self._cache:
            if len(self._cache) > 256:
                self._cache.clear()
            self._cache[key] = self.embed([png])[0]
        return self._cache[key]

    def score(self, png_a: bytes, png_b: bytes) -> float:
        cosine = float(np.dot(self._embedding(png_a), self._embedding(png_b)))
        return min(1.0, max(0.0, cosine))


def make_similarity(clip: str | None = None, **kwargs) -> Similarity:
    """CLIP when weights are named (``--clip PATH_OR_ID``), else the weight-free ssim-edges."""
    if clip:
        return ClipSimilarity(clip, **kwargs)
    return SsimSimilarity()
