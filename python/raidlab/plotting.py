"""What every report plot shares: matplotlib without a display, one way to save a figure, and
the HTML that shows it."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any


def pyplot() -> Any:
    """``matplotlib.pyplot`` on the Agg backend (reports are written without a display)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save(fig: Any, path: Path, rect: tuple[float, float, float, float] | None = None) -> Path:
    """Lay out (inside ``rect`` of the figure, if given: room for a figure legend), write
    ``path`` (PNG, 110 dpi) and close ``fig``; returns ``path``."""
    fig.tight_layout(rect=rect)
    fig.savefig(path, dpi=110)
    pyplot().close(fig)
    return path


def img(path: Path, alt: str) -> str:
    """An HTML paragraph showing the PNG ``path`` (beside the report) with ``alt`` text."""
    return f'<p><img src="{html.escape(path.name)}" alt="{html.escape(alt)}"></p>'
