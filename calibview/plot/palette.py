"""Colours and line styles of curve items: colour by one factor (calibrators), dash by another (runs, splits).

Rules:
- within a figure no two colour keys share a colour (as long as there are at most ``len(PALETTE)`` keys);
- every colour has a WCAG contrast of at least 3:1 against both themes' backgrounds (one colour per key, the same
  in both themes: luminance between 0.12 and 0.30);
- neighbours (consecutive calibrators in the usual orders:
  none, ts, ts-grid, vs, ms, dirichlet, hb, ir, mrr; and none, platt, beta, hb, ir, mrr) stay distinguishable under a deuteranopia simulation
  (Machado et al. 2009, severity 1; CIELAB distance of at least 20).
A known calibrator keeps its preferred colour whichever others are shown, unless another shown item already took
it; unknown keys take the first free palette colour. Pure Python (no Qt).
"""

from __future__ import annotations

from typing import Iterable, Sequence

__all__ = ["PALETTE", "NEUTRAL", "PREFERRED", "assign_colors", "assign_dashes", "DASHES", "contrast",
           "deuteranopia_distance"]

NEUTRAL = "#8C8C8C"        # the uncalibrated baseline: grey, 3.4:1 on white and 5.5:1 on the dark background

#: Ten colours with luminance 0.13-0.30 (3:1 against #FFFFFF and #121417), ordered so that consecutive entries
#: stay at least 40 CIELAB units apart under deuteranopia. Okabe-Ito blue, vermillion, bluish green and reddish
#: purple first; yellow, orange and sky blue are left out (under 3:1 on white).
PALETTE = ("#0072B2", "#D55E00", "#009E73", "#B8860B", "#CC79A7", "#5A7D00", "#E7298A", "#C0392B", "#7B52AE",
           "#117733")

PREFERRED = {
    "none": NEUTRAL, "ts": PALETTE[0], "ts-grid": PALETTE[1], "vs": PALETTE[2], "hb": PALETTE[3], "ir": PALETTE[4],
    "mrr": PALETTE[5], "ms": PALETTE[8], "dirichlet": PALETTE[9], "platt": PALETTE[7], "beta": PALETTE[6],
}

#: Line styles for the second factor, by order of first appearance: solid, dashed, dotted, dash-dot, dash-dot-dot.
DASHES = ("solid", "dash", "dot", "dashdot", "dashdotdot")


def assign_colors(keys: Iterable[str]) -> dict[str, str]:
    """{key: '#RRGGBB'} with distinct colours for distinct keys (up to the palette's size, then it cycles).
    Known calibrator names first claim their preferred colour; the others take free palette colours in order."""
    keys = list(dict.fromkeys(str(k) for k in keys))
    out: dict[str, str] = {}
    used: set[str] = set()
    for key in keys:
        pref = PREFERRED.get(key.lower())
        if pref is not None and pref not in used:
            out[key] = pref
            used.add(pref)
    free = [c for c in PALETTE if c not in used]
    i = 0
    for key in keys:
        if key in out:
            continue
        if free:
            out[key] = free.pop(0)
        else:                       # more keys than colours: cycle (the dash factor must tell them apart)
            out[key] = PALETTE[i % len(PALETTE)]
            i += 1
    return out


def assign_dashes(keys: Iterable[str]) -> dict[str, str]:
    """{key: style name from DASHES}: the first key solid, the next dashed, ... (cycling)."""
    keys = list(dict.fromkeys(str(k) for k in keys))
    return {k: DASHES[i % len(DASHES)] for i, k in enumerate(keys)}


def _linear(hex_color: str) -> tuple[float, float, float]:
    h = hex_color.lstrip("#")
    out = []
    for i in (0, 2, 4):
        v = int(h[i:i + 2], 16) / 255
        out.append(v / 12.92 if v <= 0.04045 else ((v + 0.055) / 1.055) ** 2.4)
    return out[0], out[1], out[2]


def luminance(hex_color: str) -> float:
    """WCAG relative luminance (0 black to 1 white) of '#RRGGBB'."""
    r, g, b = _linear(hex_color)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(a: str, b: str) -> float:
    """WCAG contrast ratio of two '#RRGGBB' colours."""
    la, lb = sorted((luminance(a), luminance(b)))
    return (lb + 0.05) / (la + 0.05)


_DEUTAN = ((0.367322, 0.860646, -0.227968), (0.280085, 0.672501, 0.047413), (-0.011820, 0.042940, 0.968881))


def _lab(rgb: Sequence[float]) -> tuple[float, float, float]:
    r, g, b = rgb
    x = (0.4124 * r + 0.3576 * g + 0.1805 * b) / 0.9505
    y = 0.2126 * r + 0.7152 * g + 0.0722 * b
    z = (0.0193 * r + 0.1192 * g + 0.9505 * b) / 1.089

    def f(t):
        return t ** (1 / 3) if t > 0.008856 else 7.787 * t + 16 / 116
    fx, fy, fz = f(x), f(y), f(z)
    return 116 * fy - 16, 500 * (fx - fy), 200 * (fy - fz)


def deuteranopia_distance(a: str, b: str) -> float:
    """CIELAB distance between ``a`` and ``b`` as seen with deuteranopia (Machado 2009 simulation, severity 1)."""
    def sim(c):
        lin = _linear(c)
        return [min(1.0, max(0.0, sum(m * v for m, v in zip(row, lin)))) for row in _DEUTAN]
    la, lb = _lab(sim(a)), _lab(sim(b))
    return sum((p - q) ** 2 for p, q in zip(la, lb)) ** 0.5
