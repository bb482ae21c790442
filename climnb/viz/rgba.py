"""Maps drawn as RGBA images in NumPy: fields through a colour map, class masks filled or
outlined, images composited and reduced by whole blocks (what the fast explorer sends).

Examples
--------
>>> import numpy as np
>>> block_reduce(np.arange(8.0).reshape(2, 4), (1, 2)).tolist()
[[2.5, 4.5]]
>>> class_rgba(np.array([[0, 1]]))[0, :, 3].tolist()
[0, 255]
"""

from __future__ import annotations

import functools

import numpy as np

from climnb.viz.fields import CLASS_COLORS

__all__ = [
    "DISAGREEMENT_COLORS",
    "DISAGREEMENT_RGB",
    "as_uint32",
    "block_reduce",
    "class_rgba",
    "colormap_rgba",
    "disagreement_array",
    "over",
    "paint",
    "palette",
]

#: Colours of the disagreement panel: 1 false positive, 2 false negative, 3 wrong class.
DISAGREEMENT_COLORS = {1: "#ff7f0e", 2: "#9467bd", 3: "#444444"}


def block_reduce(a: np.ndarray, shape: tuple[int, int], how: str = "mean") -> np.ndarray:
    """Reduce a 2-D array to at most ``shape`` (rows, columns) by whole blocks.

    ``"mean"`` averages each block (fields; NaN-aware), ``"nearest"`` keeps the block's centre
    pixel (class masks). The same blocks as
    :func:`climnb.viz.explorer.decimate`, on plain NumPy (no xarray per
    move).
    """
    fy = max(1, -(-a.shape[0] // shape[0]))
    fx = max(1, -(-a.shape[1] // shape[1]))
    if fy == fx == 1:
        return a
    if how == "nearest":
        return a[fy // 2 :: fy, fx // 2 :: fx][: a.shape[0] // fy, : a.shape[1] // fx]
    ny, nx = a.shape[0] // fy, a.shape[1] // fx
    blocks = a[: ny * fy, : nx * fx].reshape(ny, fy, nx, fx).astype(np.float32, copy=False)
    with np.errstate(invalid="ignore"):
        return np.nanmean(blocks, axis=(1, 3)) if np.isnan(blocks).any() else blocks.mean((1, 3))


def disagreement_array(lab: np.ndarray, pred: np.ndarray) -> np.ndarray:
    """:func:`climnb.viz.explorer.disagreement_codes` on plain arrays."""
    code = np.zeros(lab.shape, np.uint8)
    code[(pred > 0) & (lab == 0)] = 1
    code[(pred == 0) & (lab > 0)] = 2
    code[(pred > 0) & (lab > 0) & (pred != lab)] = 3
    return code


def hex_rgba(colors, alpha: float = 1.0) -> np.ndarray:
    """(n, 4) uint8 RGBA of hex colours."""
    out = np.empty((len(colors), 4), np.uint8)
    for i, c in enumerate(colors):
        c = c.lstrip("#")
        out[i] = (int(c[0:2], 16), int(c[2:4], 16), int(c[4:6], 16), round(255 * alpha))
    return out


@functools.lru_cache(maxsize=64)
def palette(cmap: str, n: int = 256) -> tuple[str, ...]:
    from holoviews.plotting.util import process_cmap

    return tuple(process_cmap(cmap, ncolors=n))


@functools.lru_cache(maxsize=64)
def color_table(cmap: str, n: int = 256) -> np.ndarray:
    return hex_rgba(palette(cmap, n))


def colormap_rgba(values: np.ndarray, cmap: str, clim: tuple[float, float]) -> np.ndarray:
    """A field as an (ny, nx, 4) uint8 image through a 256-colour map (NaN transparent)."""
    lut = color_table(cmap)
    lo, hi = clim
    scale = (len(lut) - 1) / (hi - lo) if hi > lo else 0.0
    with np.errstate(invalid="ignore"):
        idx = np.clip((values - lo) * scale, 0, len(lut) - 1)
    nan = np.isnan(idx)
    rgba = lut[np.where(nan, 0, idx).astype(np.uint8)]
    rgba[nan, 3] = 0
    return rgba


def edges(mask: np.ndarray) -> np.ndarray:
    """Pixels of ``mask`` with a 4-neighbour outside it (a one-pixel outline)."""
    inner = mask.copy()
    inner[1:] &= mask[:-1]
    inner[:-1] &= mask[1:]
    inner[:, 1:] &= mask[:, :-1]
    inner[:, :-1] &= mask[:, 1:]
    return mask & ~inner


CLASS_RGB = hex_rgba([CLASS_COLORS[1], CLASS_COLORS[2]])
DISAGREEMENT_RGB = hex_rgba(list(DISAGREEMENT_COLORS.values()))


def paint(rgba: np.ndarray, where: np.ndarray, color: np.ndarray, alpha: float) -> None:
    """Blend ``color`` over ``rgba`` (in place) where ``where`` holds, with opacity ``alpha``."""
    if not where.any():
        return
    px = rgba[where].astype(np.float32)
    px[:, :3] = (1 - alpha) * px[:, :3] + alpha * color[:3]
    px[:, 3] = np.maximum(px[:, 3], 255 * alpha)
    rgba[where] = px.astype(np.uint8)


def class_rgba(mask: np.ndarray, *, alpha: float = 1.0, outline: bool = False) -> np.ndarray:
    """A class mask as RGBA: background transparent, cyclones red, rivers blue (filled, or
    only their one-pixel outlines)."""
    rgba = np.zeros((*mask.shape, 4), np.uint8)
    for k in (1, 2):
        where = mask == k
        paint(rgba, edges(where) if outline else where, CLASS_RGB[k - 1], alpha)
    return rgba


def over(top: np.ndarray, bottom: np.ndarray) -> np.ndarray:
    """``top`` composited over ``bottom`` (both (ny, nx, 4) uint8, straight alpha)."""
    a = top[..., 3:4].astype(np.float32) / 255.0
    out = bottom.copy()
    out[..., :3] = (a * top[..., :3] + (1 - a) * bottom[..., :3]).astype(np.uint8)
    out[..., 3] = np.maximum(top[..., 3], bottom[..., 3])
    return out


def as_uint32(rgba: np.ndarray) -> np.ndarray:
    """(ny, nx, 4) uint8 as the (ny, nx) uint32 bokeh's ``image_rgba`` takes."""
    return np.ascontiguousarray(rgba).view(np.uint32).reshape(rgba.shape[:2])
