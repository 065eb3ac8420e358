"""Report pages: one HTML page per study or run, plus an index of them.

Pages are plain HTML with tables (from DataFrames) and PNG figures beside them,
so a person can open them from disk without a server.
"""

from __future__ import annotations

import html
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd

_STYLE = """
body { font-family: system-ui, sans-serif; max-width: 70rem; margin: 2rem auto; padding: 0 1rem; color: #222; }
table { border-collapse: collapse; margin: 1rem 0; font-size: 0.9rem; }
th, td { border: 1px solid #ccc; padding: 0.25rem 0.6rem; text-align: right; }
th { background: #f3f3f3; }
td:first-child, th:first-child { text-align: left; }
img { max-width: 100%; border: 1px solid #eee; }
.note { color: #555; }
pre { background: #f7f7f7; padding: 0.5rem; font-size: 0.8rem; overflow-x: auto; }
"""


@dataclass
class Section:
    title: str
    text: str = ""
    table: pd.DataFrame | None = None
    image: str | None = None  # file name relative to the page
    escape: bool = True  # False when the table's cells are already HTML (links)
    code: str = ""  # shown as preformatted text (a configuration)


@dataclass
class ReportPage:
    title: str
    summary: str
    sections: list[Section] = field(default_factory=list)

    def add(
        self,
        title: str,
        text: str = "",
        table: pd.DataFrame | None = None,
        image: str | None = None,
        escape: bool = True,
        code: str = "",
    ) -> None:
        self.sections.append(Section(title, text, table, image, escape, code))

    def render(self) -> str:
        parts = [
            "<!doctype html><html><head><meta charset='utf-8'>",
            f"<title>{html.escape(self.title)}</title><style>{_STYLE}</style></head><body>",
            f"<h1>{html.escape(self.title)}</h1>",
            f"<p>{html.escape(self.summary)}</p>",
        ]
        for s in self.sections:
            parts.append(f"<h2>{html.escape(s.title)}</h2>")
            if s.text:
                parts.append(f"<p class='note'>{html.escape(s.text)}</p>")
            if s.code:
                parts.append(f"<pre>{html.escape(s.code)}</pre>")
            if s.image:
                parts.append(f"<img src='{html.escape(s.image)}' alt='{html.escape(s.title)}'>")
            if s.table is not None:
                parts.append(
                    s.table.to_html(index=False, float_format=lambda v: f"{v:.4g}", border=0, escape=s.escape)
                )
        stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
        parts.append(f"<p class='note'>Written {stamp}.</p></body></html>")
        return "\n".join(parts)

    def write(self, folder: Path, name: str = "index.html") -> Path:
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / name
        path.write_text(self.render())
        return path


def update_index(reports_dir: Path) -> Path:
    """Rewrite ``reports/index.html`` listing every page under it (from each folder's ``page.json``)."""
    entries = []
    for meta_file in sorted([*reports_dir.glob("studies/*/page.json"), *reports_dir.glob("*/page.json")]):
        meta = json.loads(meta_file.read_text())
        folder = meta_file.parent.relative_to(reports_dir).as_posix()
        entries.append((meta.get("title", folder), folder, meta.get("summary", "")))
    page = ReportPage(
        "GNN systems workbench: reports", "Every study and run that wrote a page under reports/."
    )
    table = pd.DataFrame(
        [
            {
                "report": f"<a href='{html.escape(d)}/index.html'>{html.escape(t)}</a>",
                "summary": html.escape(s),
            }
            for t, d, s in entries
        ],
        columns=["report", "summary"],
    )
    page.add("Reports", table=table, escape=False)
    return page.write(reports_dir)


def register_page(folder: Path, title: str, summary: str) -> None:
    """Record a page's title for the index."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "page.json").write_text(json.dumps({"title": title, "summary": summary}, indent=1))
