"""Markdown sheets show client ids and free text as given, never as Markdown or HTML.

Checked with a real CommonMark parser with GitHub's tables (markdown-it-py, which rich already
depends on): a pack whose client ids are ``<b>x</b>``, ``a|b`` and a string of every Markdown
metacharacter keeps its tables as tables, has no HTML token, and shows each id verbatim; a
hypothesis property does the same for arbitrary text in a table cell, a heading, a list item
and a code span.
"""

from __future__ import annotations

import csv
import re
import shutil
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt
from markdown_it.token import Token
from typer.testing import CliRunner

from tenantcost.report.markdown import NO_FIGURE, Markdown, cell, code, code_cell, escape, fenced
from tenantcost.report.render import environment

ROOT = Path(__file__).resolve().parents[1]
SAAS = ROOT / "examples" / "saas-three-clients"
ODD_IDS = {
    "client-a": "<b>x</b>",
    "client-b": "a|b",
    "client-c": "# *c* _d_ [l](http://e) `t` ~s~ &lt; \\",
}
PARSER = MarkdownIt("commonmark").enable("table")


def inline_text(tokens: list[Token]) -> str:
    """The text a reader sees in inline tokens (text, code), HTML tokens excluded."""
    out = []
    for token in tokens:
        for child in token.children or []:
            if child.type in ("text", "code_inline"):
                out.append(child.content)
            elif child.type in ("softbreak", "hardbreak"):
                out.append(" ")
    return "".join(out)


def html_tokens(tokens: list[Token]) -> list[str]:
    found = [t.content for t in tokens if t.type.startswith("html")]
    for token in tokens:
        found += [c.content for c in token.children or [] if c.type.startswith("html")]
    return found


def structure(tokens: list[Token]) -> list[str]:
    """Block and inline markup other than plain text: emphasis, links, headings, code..."""
    kinds = [t.type for t in tokens if t.type != "inline"]
    for token in tokens:
        kinds += [c.type for c in token.children or [] if c.type not in ("text", "softbreak")]
    return kinds


# --------------------------------------------------------------------------- unit


def test_escape_examples():
    assert escape("<b>x</b>") == "\\<b\\>x\\</b\\>"
    assert escape("a|b") == "a\\|b"
    assert escape("cpu_seconds") == "cpu_seconds"  # inside a word: never emphasis
    assert escape("__idle__") == "\\_\\_idle\\_\\_"
    assert escape("team-*") == "team-\\*"
    assert escape("# head") == "\\# head"
    assert escape("- item") == "\\- item" and escape("1. item") == "1\\. item"
    assert escape("-1,234.56") == "-1,234.56"  # figures unchanged
    assert escape("97.0 %") == "97.0 %"
    assert escape("R&D") == "R&D" and escape("&lt;") == "\\&lt;"
    assert escape("two\nlines") == "two lines"
    assert escape(Markdown("**kept**")) == "**kept**"
    assert escape(42) == "42"


def test_code_spans_and_fences():
    assert code("saas-2026-11") == "`saas-2026-11`"
    assert code("a`b") == "``a`b``"
    assert code("`x`") == "`` `x` ``"
    assert code_cell("a|b") == "`a\\|b`"
    assert fenced("tenantcost report", "sh") == "```sh\ntenantcost report\n```"
    assert fenced("echo '```'", "sh") == "````sh\necho '```'\n````"
    assert cell("a |\n b") == "a \\| b"


TEXT = st.lists(
    st.sampled_from(
        [*"abcXYZ019 _*`~[]()<>|#&;!\\-+.=:/\"'{}é€\n", "&lt;", "&#35;", "<b>", "</b>", "1. ", "- "]
    ),
    max_size=20,
).map("".join)
WORDS = TEXT.filter(lambda t: t.strip() not in ("", NO_FIGURE))
"""Non-blank text; the empty-figure placeholder ``-`` is left unescaped on purpose (it only
stands in table cells, where it is text), so it is not tried at the start of a list item."""


def plain(text: str) -> str:
    return " ".join(text.split())


@settings(max_examples=300, deadline=None)
@given(WORDS, WORDS)
def test_any_text_stays_text(first: str, second: str):
    """In a table cell, a heading, a paragraph and a list item, text shows verbatim."""
    doc = (
        f"# Sheet: {escape(first)}\n\n"
        f"| Client | Note |\n|---|---|\n| {cell(first)} | {cell(second)} |\n\n"
        f"**Why:** {escape(second)}\n\n"
        f"- {escape(first)}\n"
    )
    tokens = PARSER.parse(doc)
    assert html_tokens(tokens) == []
    inlines = [t for t in tokens if t.type == "inline"]
    texts = [plain(inline_text([t])) for t in inlines]
    assert texts == [
        plain(f"Sheet: {first}"), "Client", "Note", plain(first), plain(second),
        plain(f"Why: {second}"), plain(first),
    ]  # fmt: skip
    kinds = [t.type for t in tokens]
    assert kinds.count("td_open") == 2 and kinds.count("tr_open") == 2
    assert kinds.count("bullet_list_open") == 1 and kinds.count("heading_open") == 1
    assert "link_open" not in structure(tokens) and "em_open" not in structure(tokens)


@settings(max_examples=200, deadline=None)
@given(TEXT)
def test_any_text_in_a_code_span_is_verbatim(text: str):
    flat = re.sub(r"[ \t]*\n[ \t]*", " ", text) if text.strip() else ""
    for doc in (f"Rule {code(text)} applies", f"| a |\n|---|\n| {code_cell(text)} |\n"):
        tokens = PARSER.parse(doc)
        spans = [c.content for t in tokens for c in t.children or [] if c.type == "code_inline"]
        if flat:
            assert spans == [flat], doc
        assert html_tokens(tokens) == []


def test_the_md_environment_escapes_every_value():
    env = environment("md", None)
    template = env.from_string("| {{ a }} | {{ b | cell }} | {{ c | code_cell }} |")
    assert template.render(a="x|y", b="<i>", c="r|1") == "| x\\|y | \\<i\\> | `r\\|1` |"
    html = environment("html", None).from_string("{{ a }}").render(a="<b>a|b_</b>")
    assert html == "&lt;b&gt;a|b_&lt;/b&gt;"  # HTML keeps its own escaping only


# --------------------------------------------------------------------------- a whole pack


@pytest.fixture(scope="module")
def odd_pack(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tenantcost.cli import app

    folder = tmp_path_factory.mktemp("odd")
    for name in ("rules.yaml", "costs.json"):
        shutil.copy(SAAS / name, folder / name)
    with (SAAS / "usage.csv").open(newline="") as src:
        rows = list(csv.DictReader(src))
    with (folder / "usage.csv").open("w", newline="") as dst:
        writer = csv.DictWriter(dst, fieldnames=list(rows[0]))
        writer.writeheader()
        for row in rows:
            writer.writerow({**row, "client": ODD_IDS.get(row["client"], row["client"])})
    out = folder / "pack"
    result = CliRunner().invoke(
        app,
        ["report", "--config", str(folder / "rules.yaml"), "--out", str(out), "--format", "md"],
    )
    assert result.exit_code == 0, result.output
    return out


def test_odd_ids_stay_text_in_every_sheet(odd_pack: Path):
    sheets = sorted((odd_pack / "clients").glob("*.md"))
    assert len(sheets) == 3
    for path in [*sheets, odd_pack / "finance-summary.md"]:
        text = path.read_text()
        tokens = PARSER.parse(text)
        assert html_tokens(tokens) == [], path
        outside_code = text
        for fence in (t for t in tokens if t.type == "fence"):
            outside_code = outside_code.replace(fence.content, "")  # shown verbatim there
        assert "<b>" not in outside_code.replace("\\<b\\>", ""), path
        # Every table row has as many cells as its header.
        widths: list[int] = []
        for token in tokens:
            if token.type == "tr_open":
                widths.append(0)
            elif token.type in ("th_open", "td_open"):
                widths[-1] += 1
            elif token.type == "table_close":
                assert len(set(widths)) == 1, (path, widths)
                widths = []


def test_odd_ids_read_verbatim(odd_pack: Path):
    headings = set()
    for sheet in (odd_pack / "clients").glob("*.md"):
        inlines = [t for t in PARSER.parse(sheet.read_text()) if t.type == "inline"]
        headings.add(inline_text(inlines[:1]))
    assert headings == {f"Cost sheet: {odd}" for odd in ODD_IDS.values()}
    summary = PARSER.parse((odd_pack / "finance-summary.md").read_text())
    rows = _table_rows(summary, "Client")
    assert sorted(r[0] for r in rows[1:4]) == sorted(ODD_IDS.values())
    assert all(len(r) == len(rows[0]) for r in rows)


def _table_rows(tokens: list[Token], first_header: str) -> list[list[str]]:
    """The cells (text) of the table whose first header cell is ``first_header``."""
    tables: list[list[list[str]]] = []
    for token in tokens:
        if token.type == "table_open":
            tables.append([])
        elif token.type == "tr_open":
            tables[-1].append([])
        elif token.type == "inline" and tables and tables[-1] and token.level >= 4:
            tables[-1][-1].append(inline_text([token]))
    return next(t for t in tables if t and t[0] and t[0][0] == first_header)
