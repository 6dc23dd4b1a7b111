"""Small SVG charts drawn on the server (no JavaScript library): jobs completed and
failed per minute, from BullMQ's metrics lists. Only numbers go into the markup."""
from __future__ import annotations

from typing import List, Sequence

from markupsafe import Markup


def throughput(completed: Sequence[int], failed: Sequence[int], *, points: int = 60,
               width: int = 240, height: int = 40, axis: bool = False) -> Markup:
    """Stacked bars, oldest minute on the left: completed in green, failed in red above.
    ``completed``/``failed`` are newest first, as BullMQ stores them."""
    done = _oldest_first(completed, points)
    bad = _oldest_first(failed, points)
    top = max([c + f for c, f in zip(done, bad)] + [1])
    pad = 14 if axis else 0
    bar = width / points
    plot = height - pad
    parts: List[str] = [f'<svg class="chart" width="{width}" height="{height}" '
                        f'viewBox="0 0 {width} {height}" role="img" '
                        f'aria-label="completed {sum(done)}, failed {sum(bad)} in the last '
                        f'{points} minutes">']
    for i, (c, f) in enumerate(zip(done, bad)):
        x = i * bar
        c_h, f_h = plot * c / top, plot * f / top
        if c:
            parts.append(f'<rect class="completed" x="{x:.1f}" y="{plot - c_h:.1f}" '
                         f'width="{max(bar - 1, 1):.1f}" height="{c_h:.1f}">'
                         f'<title>{c} completed, {points - i} min ago</title></rect>')
        if f:
            parts.append(f'<rect class="failed" x="{x:.1f}" y="{plot - c_h - f_h:.1f}" '
                         f'width="{max(bar - 1, 1):.1f}" height="{f_h:.1f}">'
                         f'<title>{f} failed, {points - i} min ago</title></rect>')
    if axis:
        parts.append(f'<line class="axis" x1="0" y1="{plot}" x2="{width}" y2="{plot}"/>')
        parts.append(f'<text x="0" y="{height - 2}">-{points} min</text>')
        parts.append(f'<text x="{width - 30}" y="{height - 2}">now</text>')
        parts.append(f'<text x="{width - 60}" y="10">max {top}/min</text>')
    parts.append("</svg>")
    return Markup("".join(parts))


def _oldest_first(values: Sequence[int], points: int) -> List[int]:
    newest_first = [max(int(v), 0) for v in list(values)[:points]]
    newest_first += [0] * (points - len(newest_first))
    return list(reversed(newest_first))
