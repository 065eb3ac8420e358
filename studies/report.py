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

from studies.verdict import Judgement, count

_STYLE = """
body { font-family: system-ui, sans-serif; max-width: 70rem; margin: 2rem auto; padding: 0 1rem; color: #222; }
table { border-collapse: collapse; margin: 1rem 0; font-size: 0.9rem; }
th, td { border: 1px solid #ccc; padding: 0.25rem 0.6rem; text-align: right; }
th { background: #f3f3f3; }
td:first-child, th:first-child { text-align: left; }
table.words td, table.words th { text-align: left; }
img { max-width: 100%; border: 1px solid #eee; }
.note { color: #555; }
pre { background: #f7f7f7; padding: 0.5rem; font-size: 0.8rem; overflow-x: auto; }
.verdict { padding: 0.3rem 0.6rem; border-left: 0.3rem solid #999; background: #f7f7f7; }
.verdict-reproduced { border-color: #2a7d2a; }
.verdict-direction-only { border-color: #c98a00; }
.verdict-contradicted { border-color: #b22222; }
.verdict-not-comparable { border-color: #777; }
.other-mode { margin-top: -0.6rem; padding: 0.2rem 0.9rem; font-size: 0.9rem; color: #555; }
.other-mode.disagree { color: #b22222; }
"""


@dataclass
class Section:
    title: str
    text: str = ""
    table: pd.DataFrame | None = None
    image: str | None = None  # file name relative to the page
    escape: bool = True  # False when the table's cells are already HTML (links)
    code: str = ""  # shown as preformatted text (a configuration)
    judgement: Judgement | None = None  # the verdict on the paper's claim this section checks
    words: bool = False  # a table of sentences, not figures: cells read left to right
    # The other mode's (quick or full) figure and verdict for this section's claim, one line under
    # the verdict, and whether the two verdicts differ (studies.pages fills both in).
    mode_line: str = ""
    modes_disagree: bool = False


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
        judgement: Judgement | None = None,
    ) -> None:
        self.sections.append(Section(title, text, table, image, escape, code, judgement))

    def judgements(self) -> list[Judgement]:
        """One judgement per claim, the one over the most figures (the first of those): a claim
        may be judged whole and in parts (one interconnect, one graph, one width), and its parts
        may come first (roc-memory judges each width, then the claim); a part's verdict is not
        the claim's."""
        seen: dict = {}
        for s in self.sections:
            j = s.judgement
            if j is not None and (j.claim not in seen or len(j.figures) > len(seen[j.claim].figures)):
                seen[j.claim] = j
        return list(seen.values())

    def render(self) -> str:
        parts = [
            "<!doctype html><html><head><meta charset='utf-8'>",
            f"<title>{html.escape(self.title)}</title><style>{_STYLE}</style></head><body>",
            f"<h1>{html.escape(self.title)}</h1>",
            f"<p>{html.escape(self.summary)}</p>",
        ]
        for s in self.sections:
            parts.append(f"<h2>{html.escape(s.title)}</h2>")
            if s.judgement is not None:
                css = "verdict-" + str(s.judgement.verdict).replace(" ", "-")
                parts.append(f"<p class='verdict {css}'>{html.escape(s.judgement.line())}</p>")
            if s.mode_line:
                css = "other-mode disagree" if s.modes_disagree else "other-mode"
                parts.append(f"<p class='{css}'>{html.escape(s.mode_line)}</p>")
            if s.text:
                parts.append(f"<p class='note'>{html.escape(s.text)}</p>")
            if s.code:
                parts.append(f"<pre>{html.escape(s.code)}</pre>")
            if s.image:
                parts.append(f"<img src='{html.escape(s.image)}' alt='{html.escape(s.title)}'>")
            if s.table is not None:
                parts.append(
                    s.table.to_html(
                        index=False,
                        float_format=lambda v: f"{v:.4g}",
                        border=0,
                        escape=s.escape,
                        na_rep="n/a",
                        classes="words" if s.words or _all_text(s.table) else None,
                    )
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
        entries.append(
            (
                meta.get("title", folder),
                folder,
                meta.get("summary", ""),
                meta.get("verdicts"),
                meta.get("modes"),
            )
        )
    page = ReportPage(
        "GNN systems workbench: reports",
        "Every study and run that wrote a page under reports/. A study's verdicts count its claims by the one "
        "rule of studies/verdict.py: reproduced (direction and size within 1.5x of the paper's), direction "
        "only, contradicted, not comparable. 'Quick vs full' counts the claims whose verdict in the page's "
        "mode differs from the other mode's (the committed record in studies/verdicts/ where this folder "
        "has no run of it).",
    )
    totals: dict[str, int] = {}
    for *_, verdicts, _modes in entries:
        for verdict, n in (verdicts or {}).items():
            totals[verdict] = totals.get(verdict, 0) + n
    table = pd.DataFrame(
        [
            {
                "report": f"<a href='{html.escape(d)}/index.html'>{html.escape(t)}</a>",
                "verdicts": html.escape(_verdict_text(v)),
                "quick vs full": html.escape(_modes_text(m, v)),
                "summary": html.escape(s),
            }
            for t, d, s, v, m in entries
        ],
        columns=["report", "verdicts", "quick vs full", "summary"],
    )
    summary = " ".join(
        [_verdict_text(totals, "Claims over all studies: ") + ".", _modes_total([e[-1] for e in entries])]
    )
    page.add("Reports", summary, table=table, escape=False)
    page.sections[-1].words = True
    return page.write(reports_dir)


def _modes_text(modes: dict | None, verdicts: dict | None) -> str:
    """One study's quick-against-full count for the index, from its page.json's ``modes``."""
    if not modes:
        # A page with verdicts but no comparison was written before pages compared modes.
        return "not compared (an older page: gnnwb report rewrites it)" if verdicts else ""
    if not modes.get("recorded"):
        return f"{modes.get('other', 'other')} mode not recorded"
    compared, disagree = modes.get("compared", 0), modes.get("disagree", 0)
    if disagree:
        return f"{disagree} of {compared} claim{'s' if compared != 1 else ''} disagree{'s' if disagree == 1 else ''}"
    return "its one claim agrees" if compared == 1 else f"all {compared} claims agree"


def _modes_total(all_modes: list[dict | None]) -> str:
    """The index's total: claims whose quick and full verdicts differ, over the studies compared."""
    compared = [m for m in all_modes if m and m.get("recorded")]
    unrecorded = sum(1 for m in all_modes if m and not m.get("recorded"))
    if not compared and not unrecorded:
        return ""  # no study page among them
    claims = sum(m.get("compared", 0) for m in compared)
    disagree = sum(m.get("disagree", 0) for m in compared)
    text = (
        f"Quick and full mode disagree on {disagree} of {claims} claims compared, over {len(compared)} "
        f"stud{'y' if len(compared) == 1 else 'ies'}"
    )
    if unrecorded:
        text += f"; {unrecorded} with no record of the other mode"
    return text + "."


def _all_text(table: pd.DataFrame) -> bool:
    """A table with no column of figures (a setting, a list of notes) reads left to right."""
    return len(table.columns) > 0 and all(table[c].dtype == object for c in table.columns)


def _verdict_text(verdicts: dict[str, int] | None, prefix: str = "") -> str:
    if not verdicts:
        return "" if not prefix else prefix + "none"
    return prefix + ", ".join(f"{n} {v}" for v, n in verdicts.items() if n)


def register_page(
    folder: Path,
    title: str,
    summary: str,
    judgements: list[Judgement] | None = None,
    modes: dict | None = None,
) -> None:
    """Record a page's title, the count of its claims' verdicts and, for a study, how its mode's
    verdicts compare with the other mode's (``modes``: mode, other, recorded, compared, disagree),
    for the index."""
    folder.mkdir(parents=True, exist_ok=True)
    meta: dict = {"title": title, "summary": summary}
    if judgements is not None:
        meta["verdicts"] = count(judgements)
    if modes is not None:
        meta["modes"] = modes
    (folder / "page.json").write_text(json.dumps(meta, indent=1))
