"""Colours and line styles of curve items: colour by one factor (calibrators), dash by another (runs, splits).

Rules:
- within a figure no two colour keys share a colour (as long as there are at most ``len(PALETTE)`` keys);
- every colour has a WCAG contrast of at least 3:1 against both themes' backgrounds (one colour per key, the same
  in both themes: luminance between 0.12 and 0.30);
- every two calibrators' preferred colours are at least ``MIN_DISTANCE`` apart in CIEDE2000 (``color_distance``),
  since any of them may be shown together (beta and isotonic were two near-identical pinks before);
- neighbours (consecutive calibrators in the usual orders:
  none, ts, ts-grid, vs, ms, dirichlet, hb, ir, mrr; and none, platt, beta, hb, ir, mrr) stay distinguishable under a deuteranopia simulation
  (Machado et al. 2009, severity 1; CIELAB distance of at least 20).
A known calibrator keeps its preferred colour whichever others are shown, unless another shown item already took
it; unknown keys take the first free palette colour. Pure Python (no Qt).
"""

from __future__ import annotations

from typing import Iterable, Sequence

__all__ = ["PALETTE", "NEUTRAL", "PREFERRED", "MIN_DISTANCE", "assign_colors", "assign_dashes", "DASHES",
           "contrast", "color_distance", "deuteranopia_distance"]

NEUTRAL = "#8C8C8C"        # the uncalibrated baseline: grey, 3.4:1 on white and 5.5:1 on the dark background

#: Ten colours with luminance 0.12-0.30 (3:1 against #FFFFFF and #121417), each two at least MIN_DISTANCE apart
#: in CIEDE2000 (also from the grey NEUTRAL). Okabe-Ito blue, vermillion, bluish green and reddish purple; yellow,
#: orange and sky blue are left out (under 3:1 on white); the others were searched on a grid of sRGB colours for
#: the largest smallest distance, with the deuteranopia rule for neighbours as a constraint.
PALETTE = ("#0072B2", "#D55E00", "#009E73", "#AB00CF", "#CC79A7", "#7E9900", "#7E6309", "#C60948", "#907EFC",
           "#00A2B4")
#: The smallest CIEDE2000 distance between any two calibrators' preferred colours (about 2.3 is "just noticeable").
MIN_DISTANCE = 20.0

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


def _de2000(lab1: Sequence[float], lab2: Sequence[float]) -> float:
    """CIEDE2000 colour difference of two CIELAB colours (Sharma, Wu and Dalal 2005, with their implementation
    notes: hue angles in degrees, the mean hue of neutral colours taken as the sum)."""
    from math import atan2, cos, degrees, exp, hypot, radians, sin, sqrt

    (l1, a1, b1), (l2, a2, b2) = lab1, lab2
    c_mean = (hypot(a1, b1) + hypot(a2, b2)) / 2
    g = 0.5 * (1 - sqrt(c_mean ** 7 / (c_mean ** 7 + 25 ** 7)))
    a1p, a2p = (1 + g) * a1, (1 + g) * a2
    c1p, c2p = hypot(a1p, b1), hypot(a2p, b2)
    h1p = degrees(atan2(b1, a1p)) % 360 if c1p else 0.0
    h2p = degrees(atan2(b2, a2p)) % 360 if c2p else 0.0
    dh = 0.0 if c1p * c2p == 0 else (h2p - h1p + 180) % 360 - 180
    d_hue = 2 * sqrt(c1p * c2p) * sin(radians(dh / 2))
    l_mean, cp_mean = (l1 + l2) / 2, (c1p + c2p) / 2
    if c1p * c2p == 0:
        h_mean = h1p + h2p
    elif abs(h1p - h2p) <= 180:
        h_mean = (h1p + h2p) / 2
    else:
        h_mean = (h1p + h2p + (360 if h1p + h2p < 360 else -360)) / 2
    t = (1 - 0.17 * cos(radians(h_mean - 30)) + 0.24 * cos(radians(2 * h_mean))
         + 0.32 * cos(radians(3 * h_mean + 6)) - 0.20 * cos(radians(4 * h_mean - 63)))
    rc = 2 * sqrt(cp_mean ** 7 / (cp_mean ** 7 + 25 ** 7))
    rt = -sin(radians(60 * exp(-((h_mean - 275) / 25) ** 2))) * rc
    sl = 1 + 0.015 * (l_mean - 50) ** 2 / sqrt(20 + (l_mean - 50) ** 2)
    sc, sh = 1 + 0.045 * cp_mean, 1 + 0.015 * cp_mean * t
    dl, dc, dhh = (l2 - l1) / sl, (c2p - c1p) / sc, d_hue / sh
    return sqrt(dl ** 2 + dc ** 2 + dhh ** 2 + rt * dc * dhh)


def color_distance(a: str, b: str) -> float:
    """CIEDE2000 difference of two '#RRGGBB' colours as seen with normal vision (0: the same; 20: clearly two
    colours; CIE76 distances overrate a saturation difference, which made two pinks look far apart)."""
    return _de2000(_lab(_linear(a)), _lab(_linear(b)))


def deuteranopia_distance(a: str, b: str) -> float:
    """CIELAB distance between ``a`` and ``b`` as seen with deuteranopia (Machado 2009 simulation, severity 1)."""
    def sim(c):
        lin = _linear(c)
        return [min(1.0, max(0.0, sum(m * v for m, v in zip(row, lin)))) for row in _DEUTAN]
    la, lb = _lab(sim(a)), _lab(sim(b))
    return sum((p - q) ** 2 for p, q in zip(la, lb)) ** 0.5
