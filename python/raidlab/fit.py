"""Tables that fit the terminal: never cut a number, shorten run names to what differs.

A table is a first column of labels (run names) and columns of formatted cells. It is printed
as one table when it fits the console width; otherwise its columns are split over several
tables (each repeating the label column); when even one column does not fit beside the
labels, every row is printed as a compact ``label`` line followed by ``header value`` pairs.
Numbers are never wrapped, folded or cut: their columns are exactly as wide as their widest
cell (headers wrap between words instead).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any, Sequence

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

# The label column gets at least this many characters before columns are split off.
LABEL_MIN = 14
# A table of grouped rows (`grid_groups`) holds at least this many rows on average.
GROUP_ROWS_MIN = 6
# Box-drawing overhead of one column (two padding spaces and one rule) in rich's default box.
COLUMN_OVERHEAD = 3


@dataclass(frozen=True)
class Column:
    header: str
    cells: list[str]
    numeric: bool = True
    # Whether the header may wrap between its words (else the column fits it on one line).
    wrap_header: bool = True

    @property
    def width(self) -> int:
        words = [len(w) for w in self.header.split()] or [0]
        head = max(words) if self.wrap_header else len(self.header)
        return max([head, *(len(c) for c in self.cells)])

    @property
    def min_width(self) -> int:
        """Numbers need their whole width; text may wrap between words (down to 16)."""
        if self.numeric:
            return self.width
        words = [len(w) for c in [self.header, *self.cells] for w in c.split()] or [0]
        return min(self.width, max(max(words), 16))


def table_width(label_width: int, widths: Sequence[int]) -> int:
    """Width of a rich table (default box) with a label column and ``widths``."""
    return label_width + sum(widths) + COLUMN_OVERHEAD * (len(widths) + 1) + 1


def groups(width: int, label_width: int, columns: Sequence[Column], word: int = 0) -> list[list[Column]] | None:
    """Split ``columns`` into runs of columns that fit ``width`` beside a label column wide
    enough for the labels' longest word (``word``; at least ``LABEL_MIN``, at most half the
    width, at most ``label_width``); ``None`` if one column alone does not fit."""
    need = min(label_width, max(LABEL_MIN, min(word, width // 2)))
    out: list[list[Column]] = []
    current: list[Column] = []
    for c in columns:
        if table_width(need, [x.min_width for x in [*current, c]]) <= width:
            current.append(c)
            continue
        if not current:
            return None
        out.append(current)
        current = [c]
        if table_width(need, [c.min_width]) > width:
            return None
    if current:
        out.append(current)
    return out


def print_table(
    console: Console,
    first: str,
    labels: Sequence[str],
    columns: Sequence[Column],
    title: str | None = None,
) -> None:
    """Print ``labels`` and ``columns`` so that they fit ``console.width`` (see the module)."""
    width = console.width
    label_width = max([len(first), *(len(s) for s in labels)])
    word = max([len(w) for s in [first, *labels] for w in s.split()] or [0])
    whole = [replace(c, wrap_header=False) for c in columns]
    if table_width(label_width, [c.width for c in whole]) <= width:
        columns = whole  # everything fits on one line each: headers are not wrapped either
    parts = groups(width, label_width, columns, word) if columns else [[]]
    if len(labels) == 1 and (parts is None or len(parts) > 1):
        # One row that does not fit across: one line per column instead.
        cells = [c.cells[0] for c in columns]
        numeric = all(c.numeric for c in columns)
        if table_width(max(len(c.header) for c in columns), [max(len(labels[0]), *map(len, cells))]) <= width:
            print_table(console, "", [c.header for c in columns], [Column(labels[0], cells, numeric, False)], title)
            return
    if parts is None:
        print_pairs(console, labels, columns, title)
        return
    for i, part in enumerate(parts):
        widths = [c.min_width for c in part]
        label = max(1, min(label_width, width - table_width(0, widths)))
        spare = width - table_width(label, widths)
        for j, c in enumerate(part):  # text columns grow back toward their full width
            grow = max(0, min(spare, c.width - widths[j]))
            widths[j] += grow
            spare -= grow
        table = Table(
            title=escape(title) if title and i == 0 else None,
            show_header=True,
            header_style="bold",
            box=box.HEAVY_HEAD,
        )
        table.add_column(escape(first), width=label, overflow="fold")
        for c, w in zip(part, widths):
            table.add_column(escape(c.header), justify="right" if c.numeric else "left", width=w, overflow="fold")
        for row, name in enumerate(labels):
            table.add_row(Text(name, overflow="fold"), *(Text(c.cells[row], no_wrap=c.numeric, overflow="fold") for c in part))
        console.print(table)


def print_pairs(console: Console, labels: Sequence[str], columns: Sequence[Column], title: str | None = None) -> None:
    """The compact form: each label on its own line, then ``header value`` pairs packed into
    lines of the console's width (a pair is never split)."""
    if title:
        console.print(Text(title, style="bold"))
    width = max(console.width, 1)
    for row, label in enumerate(labels):
        console.print(Text(label, style="bold"), overflow="fold")
        line = ""
        for c in columns:
            pair = f"{c.header}: {c.cells[row]}"
            if line and len(line) + 3 + len(pair) > width:
                console.print(Text(line), soft_wrap=True)
                line = ""
            line = f"{line}   {pair}" if line else f"  {pair}"
        if line:
            console.print(Text(line), soft_wrap=True)


# A token of a run name: `key=value`, where the value runs up to the next ` key=`.
_TOKEN = re.compile(r"\s+(?=[A-Za-z_][\w.\[\]-]*=)")


def name_tokens(name: str) -> list[str]:
    return [t for t in _TOKEN.split(name.strip()) if t]


def short_names(names: Sequence[str]) -> tuple[list[str], str]:
    """Names shortened to what differs between them: ``key=value`` tokens common to every
    name are dropped (and returned, joined, as the second item), and dotted keys keep their
    last part where that is unambiguous (``cache.policy=lru`` -> ``policy=lru``)."""
    if len(names) < 2:
        return list(names), ""
    split = [name_tokens(n) for n in names]
    common = [t for t in split[0] if all(t in s for s in split[1:])]
    rest = [[t for t in s if t not in common] for s in split]
    # A key whose value follows from the others (a [[runs]] label and the generator settings
    # it stands for) is dropped, latest first, as long as the names stay distinct.
    order: list[str] = []
    for s in rest:
        for t in s:
            k = t.split("=", 1)[0]
            if "=" in t and k not in order:
                order.append(k)
    distinct = len(set(map(tuple, rest)))
    for k in reversed(order):
        trial = [[t for t in s if t.split("=", 1)[0] != k] for s in rest]
        if len(set(map(tuple, trial))) == distinct and all(trial):
            rest = trial
    keys = {t.split("=", 1)[0] for s in rest for t in s if "=" in t}
    last: dict[str, list[str]] = {}
    for k in keys:
        last.setdefault(k.rsplit(".", 1)[-1], []).append(k)
    rename = {ks[0]: tail for tail, ks in last.items() if len(ks) == 1}

    def shorten(t: str) -> str:
        if "=" not in t:
            return t
        k, v = t.split("=", 1)
        return f"{rename.get(k, k)}={v}"

    short = [" ".join(shorten(t) for t in s) for s in rest]
    if any(not s for s in short) or len(set(short)) < len(set(names)):
        return list(names), ""
    return short, " ".join(common)


def grid_groups(names: Sequence[str], budget: int, first: str = "run") -> list[tuple[str, list[int], str, list[str]]]:
    """Rows of a table split into groups that keep every label on one line.

    Names that all set the same keys in the same order (a sweep's grid) become their values
    alone under a header naming the keys once (``policy / disks``, ``lru / 5``); when those
    labels are still longer than ``budget`` characters, the leading keys move to a heading
    per group (``workload=websearch disks=5``) until they fit. Returns ``(heading, rows,
    header, labels)`` per group, in order of first appearance; other names come back as
    one group with no heading, under ``first``."""
    split = [name_tokens(n) for n in names]
    keys = [[t.split("=", 1)[0] if "=" in t else None for t in s] for s in split]
    whole = [("", list(range(len(names))), first, list(names))]
    if len(names) < 2 or not keys[0] or None in keys[0] or any(k != keys[0] for k in keys[1:]):
        return whole
    values = [[t.split("=", 1)[1] for t in s] for s in split]
    lead = 0  # keys moved to the group headings
    while lead < len(keys[0]) - 1 and max(len(" / ".join(v[lead:])) for v in values) > budget:
        # Tables of a few rows each cost more lines in headers than wrapped labels do.
        if len(names) < GROUP_ROWS_MIN * len({tuple(v[: lead + 1]) for v in values}):
            break
        lead += 1
    out: dict[tuple[str, ...], list[int]] = {}
    for i, v in enumerate(values):
        out.setdefault(tuple(v[:lead]), []).append(i)
    header = " / ".join(keys[0][lead:])
    return [
        (" ".join(f"{k}={x}" for k, x in zip(keys[0], head)), rows, header, [" / ".join(values[i][lead:]) for i in rows])
        for head, rows in out.items()
    ]


def cell(value: Any, fmt: str | None = None) -> str:
    """A value as a table cell: ``fmt`` if given and it applies, else integers with thousands
    separators and floats to 6 significant digits; missing values as ``-``."""
    if value is None or (isinstance(value, float) and value != value):
        return "-"
    if fmt is not None:
        try:
            return fmt.format(value)
        except (TypeError, ValueError):
            pass
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, (list, dict)):
        import json

        return json.dumps(value, separators=(",", ":"))
    return str(value)


def choose(spec: str | None) -> list[str] | None:
    """``--columns a,b c`` -> ``["a", "b", "c"]`` (``None`` if not given)."""
    if spec is None:
        return None
    return [s for s in re.split(r"[,\s]+", spec) if s]
