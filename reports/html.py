"""The self-contained HTML audit: one file with its CSS, script, charts and data inline.

The page makes no network request of any kind. A Content-Security-Policy
admits only this page's own style and script (by hash) and forbids every
fetch, so even a string that escaped escaping could neither run nor load
anything. Trace strings reach the page through `html.escape` or, for the
table and hover card, as JSON the script writes with `textContent`.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Sequence
from functools import lru_cache
from html import escape
from importlib import resources
from typing import TypeVar

from ..costmodel import units as qty
from .model.report import SCHEMA, ReportModel
from .payload import build_payload, script_json
from .sections import REPORT_SECTIONS, RenderOptions, Section, header

D = TypeVar("D")


@lru_cache(maxsize=None)
def _asset(name: str) -> str:
    return (resources.files(__package__) / "assets" / name).read_text(encoding="utf-8")


def _sha256(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii") + "'"


def _csp(style: str, script: str | None) -> str:
    scripts = _sha256(script) if script else "'none'"
    return (f"default-src 'none'; style-src {_sha256(style)}; script-src {scripts}; "
            "img-src data:; base-uri 'none'; form-action 'none'")


def render_sections(doc: D, sections: Sequence[Section[D]], opts: RenderOptions) -> str:
    """A navigation bar and every section that has something to show, each under its heading."""
    rendered = [(s, html) for s in sections if (html := s.html(doc, opts)) is not None]
    nav = "".join(f'<a href="#sec-{s.id}">{escape(s.title)}</a>' for s, _ in rendered)
    body = "".join(f'<section id="sec-{s.id}"><h2>{escape(s.title)}</h2>'
                   + (f'<p class="intro">{escape(s.intro)}</p>' if s.intro else "") + f"{html}</section>"
                   for s, html in rendered)
    return f'<nav class="toc">{nav}</nav><main>{body}</main>'


def page(title: str, head: str, body: str, footer: str, data: object | None = None) -> str:
    """One self-contained page: the report's style, and its script only when it has data to show."""
    style = _asset("report.css")
    script = _asset("report.js") if data is not None else None
    return "".join([
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">",
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f'<meta http-equiv="Content-Security-Policy" content="{escape(_csp(style, script))}">',
        '<meta name="referrer" content="no-referrer">',
        f"<title>{escape(title)}</title>",
        f"<style>{style}</style></head>\n<body>\n",
        head, body, f"<footer>{footer}</footer>",
        f'\n<script type="application/json" id="audit-data">{script_json(data)}</script>\n' if data is not None else "",
        f"<script>{script}</script>\n" if script else "",
        "</body></html>\n",
    ])


def render_html(report: ReportModel) -> str:
    """Render an analysed report as one self-contained HTML page.

    **Arguments:**
    - `report`: the analysed report; optional sections (timeline, collectives, plan, pod...)
      appear only when it has their data.

    **Returns:** the page as a string, UTF-8 text ready to write to a file.
    """
    tool = report.tool
    footer = (f'{escape(str(tool.get("name", "audit")))} {escape(str(tool.get("version", "")))} · '
              f"{escape(SCHEMA)} · times in seconds per device, "
              f"GB = 10<sup>9</sup> bytes · unknown values show as {qty.UNKNOWN}")
    return page(f"Roofline audit · {header.subject(report)}", header.html(report),
                render_sections(report, REPORT_SECTIONS, RenderOptions()), footer, build_payload(report))
