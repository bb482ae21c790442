"""The background climate of the synthetic fields: zonal means (moist warm tropics, cold dry
poles, subtropical highs, westerlies and trades), smooth large-scale noise evolving in time,
topography, and the heights that follow from pressure and temperature.
"""

from __future__ import annotations

import numpy as np

__all__ = ["Noise", "background", "finish", "topography"]

_G = 9.80665  # m s-2
_RD = 287.04  # J kg-1 K-1
_H = _RD / _G  # m K-1, hypsometric scale


# ---------------------------------------------------------------------------------------------
# Background climate
# ---------------------------------------------------------------------------------------------


class Noise:
    """Smooth, large-scale random fields, periodic in longitude, evolving as AR(1) in time.

    A field is ``A_lat @ C @ B_lon`` with a few meridional modes and zonal wavenumbers up to
    ``m_max``: two small matrix products, so it costs ~1 ms even at full size.
    """

    def __init__(self, rng, lat, lon, n_fields, k_max=8, m_max=8, memory=0.8):
        colat = np.radians(90.0 - lat)
        self.a = np.stack([np.cos(k * colat) for k in range(k_max + 1)], axis=1)
        lam = np.radians(lon)
        modes = [np.ones_like(lam)]
        for m in range(1, m_max + 1):
            modes += [np.cos(m * lam), np.sin(m * lam)]
        self.b = np.stack(modes)  # zonal waves are damped by coslat in field(): 0 at the poles
        self.coslat = np.cos(np.radians(lat))[:, None]
        k = np.arange(k_max + 1)[:, None]
        m = np.concatenate([[0], np.repeat(np.arange(1, m_max + 1), 2)])[None, :]
        self.scale = 1.0 / (1.0 + 0.35 * np.hypot(k, m)) ** 1.5
        self.scale /= np.sqrt((self.scale**2).sum() / 3.0)
        self.rng, self.memory = rng, memory
        self.coef = rng.standard_normal((n_fields, *self.scale.shape))

    def step(self):
        eps = self.rng.standard_normal(self.coef.shape)
        self.coef = self.memory * self.coef + np.sqrt(1 - self.memory**2) * eps

    def field(self, i: int) -> np.ndarray:
        c = self.coef[i] * self.scale
        zonal = self.a @ c[:, :1] * self.b[:1]
        waves = (self.a @ c[:, 1:]) @ self.b[1:]
        return (zonal + self.coslat * waves).astype(np.float32)


def background(lat, noise: Noise, topo, rh0=0.75, jet0=12.0) -> dict[str, np.ndarray]:
    phi = np.radians(lat)[:, None].astype(np.float32)
    s2 = np.sin(phi) ** 2
    n = [noise.field(i) for i in range(7)]
    ts = 302.0 - 50.0 * s2 + 3.0 * n[0]
    psl = (
        101325.0
        + 900.0 * np.exp(-(((np.abs(phi) - 0.52) / 0.16) ** 2))
        - 1400.0 * np.exp(-(((np.abs(phi) - 1.05) / 0.18) ** 2))
        + 700.0 * n[1]
    )
    u = (
        jet0 * np.exp(-(((np.abs(phi) - 0.79) / 0.22) ** 2))
        - 5.0 * np.exp(-((phi / 0.2) ** 2))
        + 4.0 * n[2]
    )
    v = 4.0 * n[3]
    rh = np.clip(rh0 + 0.12 * n[4], 0.3, 1.0)
    tmq = rh * 62.0 * np.exp(0.065 * (ts - 302.0))
    prect = 4e-8 * (tmq / 50.0) ** 2 * np.exp(1.2 * n[5])
    return {
        "TS": ts,
        "PSL": psl,
        "U850": u,
        "V850": v,
        "TMQ": tmq,
        "PRECT": prect,
        "T500": 0.6 * ts + 85.0 + 1.5 * n[6],
        "T200": 218.0 + 4.0 * s2 + 1.0 * n[6],
        "topo": topo,
    }


def topography(rng, lat, lon) -> np.ndarray:
    """A fixed smooth land height (m), zero over 'ocean', for PS and ZBOT."""
    noise = Noise(rng, lat, lon, 1, k_max=6, m_max=6, memory=0.0)
    return np.clip(noise.field(0) - 0.6, 0.0, None) * 1500.0


def finish(f: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Derive the remaining channels so that they agree with each other physically."""
    ts, psl, topo = f["TS"], f["PSL"], f.pop("topo")
    f["TREFHT"] = ts - 1.5
    f["PS"] = psl * np.exp(-topo / (_H * ts))
    f["ZBOT"] = np.float32(62.0) + 0.1 * (f["TREFHT"] - 280.0)
    f["UBOT"] = 0.7 * f["U850"] - 0.15 * f["V850"]
    f["VBOT"] = 0.7 * f["V850"] + 0.15 * f["U850"]
    f["QREFHT"] = 3.4e-4 * f["TMQ"]
    # hypsometric equation: 1000 hPa height from PSL, 1000-200 hPa thickness from mean T
    f["Z1000"] = _H * (ts - 3.0) * np.log(psl / 100000.0)
    t_mean = (f["TREFHT"] + 2.0 * f["T500"] + f["T200"]) / 4.0
    f["Z200"] = f["Z1000"] + _H * t_mean * np.log(5.0)
    return {k: np.asarray(v, dtype=np.float32) for k, v in f.items()}
