"""Render the README's picture of the HTML report: `python scripts/screenshot.py` after `make demo`.

Opens the report in headless Chromium (Debian's package, driven by Playwright, as the browser
tests do) and saves the page from its verdict down: where the time goes, the flagged ops and
the roofline chart. The header above it names the input by its path on this machine, which the
picture leaves out.

    python scripts/screenshot.py [--html out/demo/report.html] [--out docs/images/report.png]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = Path("/usr/bin/chromium")
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run", "--disable-quic", "--hide-scrollbars"]
FIRST_SECTION = "sec-verdict"


def screenshot(html: Path, out: Path, width: int = 1280, height: int = 1400) -> Path:
    """Save `height` CSS pixels of `html` from its verdict section down, `width` wide, as a PNG at `out`."""
    from playwright.sync_api import sync_playwright

    out.parent.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            page = browser.new_page(viewport={"width": width, "height": height})
            page.goto(html.resolve().as_uri())
            page.wait_for_load_state("load")
            top = page.locator(f"#{FIRST_SECTION}").bounding_box()
            if top is None:
                raise SystemExit(f"screenshot: {html} has no #{FIRST_SECTION} section; is it an audit report?")
            page.screenshot(path=str(out), full_page=True,
                            clip={"x": 0, "y": top["y"], "width": width, "height": height})
        finally:
            browser.close()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--html", type=Path, default=ROOT / "out" / "demo" / "report.html")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "images" / "report.png")
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("--height", type=int, default=1400)
    args = parser.parse_args(argv)
    if not args.html.is_file():
        print(f"screenshot: {args.html} does not exist; run `make demo` first", file=sys.stderr)
        return 2
    try:
        import playwright  # noqa: F401  (installed in the project's .venv by `make install`)
    except ImportError:
        print("screenshot: Playwright is not installed in this Python; activate the project's environment "
              "(source .venv/bin/activate) or run .venv/bin/python scripts/screenshot.py", file=sys.stderr)
        return 2
    if not CHROMIUM.exists():
        print(f"screenshot: no Chromium at {CHROMIUM}; run `make browser`", file=sys.stderr)
        return 2
    print(screenshot(args.html, args.out, args.width, args.height))
    return 0


if __name__ == "__main__":
    sys.exit(main())
