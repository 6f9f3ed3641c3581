"""The static twins on the built site: every chapter page's controls work with no kernel and no network.

Serves the built site (default _build/html; $GEMMLAB_SITE names another root) on 127.0.0.1, opens each chapter
page of PAGES in headless Debian Chromium through Playwright (never a downloaded browser), and for every twin on
the page (a div[data-gemmlab-twin], gemmlab/chapters/sitecontrols.py):

- rebuilds the chart in Python from the call the div names, and checks that the page's chart was built from the
  same data (its id is a digest of the spec: a stale notebook output fails here);
- reads the chart's text and compares it with `Chart.label_for`, recomputed from the records and models;
- moves every control through every option in turn, the others at their defaults (sets a range input's value and
  dispatches input/change, or selects an option), checks that the text equals what the Python side computes for
  that setting, and that the chart is never empty: it draws marks, or its text says why the setting cannot run.

Every request the page makes is routed: anything not on localhost (or file:, data:, blob:) is aborted and fails
the test, and so does any JavaScript error on the console.

    make site && python -m pytest -m browser tests/site
    GEMMLAB_SITE=/tmp/book/_build/html python -m pytest -m browser tests/site
    GEMMLAB_SITE_SCREENSHOTS=/tmp/shots ...     (also saves each page, after its controls moved, as PNG)
"""
from __future__ import annotations

import functools
import http.server
import json
import os
import threading
import time
import urllib.parse
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SITE = Path(os.environ.get("GEMMLAB_SITE", ROOT / "_build" / "html"))
CHROMIUM = Path(os.environ.get("GEMMLAB_CHROMIUM", "/usr/bin/chromium"))
SCREENSHOTS = os.environ.get("GEMMLAB_SITE_SCREENSHOTS")

# chapter -> its page, relative to the site root. Each must show at least one static twin.
PAGES = {
    "1": "book/01_gpu_hardware.html",
    "2": "book/02_coalescing.html",
    "3": "book/03_smem_tiling.html",
    "4": "book/04_register_tiling.html",
    "5": "book/05_bank_conflicts.html",
    "6": "book/06_async_prefetch.html",
    "7": "book/07_tensor_cores.html",
    "7b": "book/07b_tensor_core_ladder.html",
    "7d": "book/07d_hopper_schedule.html",
    "8": "book/08_fusion.html",
    "9": "book/09_fusion_hopper.html",
}
# Errors that Jupyter Book 1's own stack logs on every page of the site, with or without a twin (exact texts):
# sphinx-thebe 0.3.1 writes its configuration script twice into each page's head, and pydata-sphinx-theme 0.17
# finds no stored light/dark mode on a first visit. Any other error fails the test.
THEME_ERRORS = {
    "page error: Identifier 'THEBE_JS_URL' has already been declared",
    "console.error: Got invalid theme mode: . Resetting to auto.",
}
LOCAL_HOSTS = {"127.0.0.1", "localhost", "::1", "[::1]"}
LOCAL_SCHEMES = {"file", "data", "blob", "about"}
RENDER_TIMEOUT_MS = 20_000

pytestmark = pytest.mark.browser


def _no_browser() -> str | None:
    if not CHROMIUM.exists():
        return f"no Chromium at {CHROMIUM} (apt-get install -y chromium)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed (pip install -r requirements.txt)"
    return None


@pytest.fixture(scope="module")
def browser():
    reason = _no_browser()
    if reason:  # CI's explicit browser run sets GEMMLAB_REQUIRE_BROWSER: there a missing browser fails, never skips
        (pytest.fail if os.environ.get("GEMMLAB_REQUIRE_BROWSER") else pytest.skip)(reason)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        # Debian's Chromium, never a browser Playwright downloads; --no-sandbox: CI runs as root
        b = pw.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=["--no-sandbox"])
        yield b
        b.close()


@pytest.fixture(scope="module")
def server():
    if not (SITE / "index.html").is_file():
        (pytest.fail if os.environ.get("GEMMLAB_REQUIRE_BROWSER") else pytest.skip)(
            f"no built site at {SITE} (make site first, or set GEMMLAB_SITE)")

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(SITE)))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/"
    httpd.shutdown()
    httpd.server_close()


def _is_local(url: str) -> bool:
    parts = urllib.parse.urlsplit(url)
    return parts.scheme in LOCAL_SCHEMES or (parts.scheme in ("http", "https") and parts.hostname in LOCAL_HOSTS)


def _read_label(div) -> list[list[str]]:
    """The lines of every text mark named label in this twin (one text element per matching row)."""
    return div.evaluate("""el => Array.from(el.querySelectorAll('g.label_marks text')).map(t => {
        const spans = t.querySelectorAll('tspan');
        return spans.length ? Array.from(spans).map(s => s.textContent) : [t.textContent];
    })""")


def _wait_for_label(div, before, timeout_s: float = 10.0, until_equal: bool = False):
    """The label once it differs from `before` (or, with until_equal, once it equals it), or after timeout_s."""
    deadline = time.monotonic() + timeout_s
    now = _read_label(div)
    while (now == before) != until_equal and time.monotonic() < deadline:
        time.sleep(0.05)
        now = _read_label(div)
    return now


# Why a setting shows no picture: the chart's text must say it in words (sitecontrols: "cannot run: ...").
CANNOT_RUN = "cannot run"


def _plot_marks(div) -> int:
    """How many data marks (bars, points, cells) the twin draws outside its text view, axes, legends and titles."""
    return div.evaluate("""el => Array.from(el.querySelectorAll('g.role-mark:not(.label_marks)'))
        .filter(g => !g.closest('.role-axis, .role-legend, .role-title'))
        .reduce((n, g) => n + g.querySelectorAll(':scope > path, :scope > rect, :scope > text').length, 0)""")


def _check_not_empty(div, what: str, settings: dict, label: list[list[str]]) -> None:
    """A setting shows a picture, or its text says in words why it cannot run; never an empty chart."""
    lines = [line for part in label for line in part if line.strip()]
    assert lines, f"{what}: at {settings} the chart shows no text"
    if not _plot_marks(div):
        assert CANNOT_RUN in " ".join(lines), (
            f"{what}: at {settings} the chart is empty and its text does not say why: {lines}")


def _set_control(div, control, value) -> None:
    if control.input == "range":
        box = div.locator(f'input[type="range"][name="{control.name}"]')
        box.evaluate("""(el, v) => { el.value = v;
            el.dispatchEvent(new Event('input', {bubbles: true}));
            el.dispatchEvent(new Event('change', {bubbles: true})); }""", str(value))
    else:
        div.locator(f'select[name="{control.name}"]').select_option(index=list(control.options).index(value))


def _rebuild(call: dict):
    from gemmlab import sitecontrols

    return getattr(sitecontrols, call["fn"])(**call["kwargs"])


@pytest.mark.parametrize("chapter", list(PAGES))
def test_chapter_controls(chapter, browser, server):
    path = SITE / PAGES[chapter]
    assert path.is_file(), f"chapter {chapter}: no page {path}"
    external: list[str] = []
    errors: list[str] = []
    page = browser.new_page(viewport={"width": 1280, "height": 1000})

    def route(r):
        url = r.request.url
        if _is_local(url):
            r.continue_()
        else:
            external.append(url)
            r.abort()

    page.route("**/*", route)
    page.on("console", lambda m: errors.append(f"console.error: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(f"page error: {e}"))
    page.on("requestfailed", lambda r: None if not _is_local(r.url) else
            errors.append(f"request failed: {r.url} ({r.failure})"))
    problems: list[str] = []
    try:
        page.goto(server + PAGES[chapter], wait_until="load")
        twins = page.locator("div[data-gemmlab-twin]")
        assert twins.count() >= 1, f"chapter {chapter}: {PAGES[chapter]} shows no static twin (div[data-gemmlab-twin])"
        moved = 0
        for i in range(twins.count()):
            div = twins.nth(i)
            call = json.loads(div.get_attribute("data-gemmlab-twin"))
            what = f"chapter {chapter}, {call['fn']}({call['kwargs']})"
            chart = _rebuild(call)
            page_id = div.get_attribute("id")
            assert page_id.split("-")[2] == chart.digest, (
                f"{what}: the page's chart ({page_id}) holds other data than the Python side computes now "
                f"(gemmlab-twin-{chart.digest}): re-run the notebook so that it stores the current records and models")
            div.locator("svg").first.wait_for(timeout=RENDER_TIMEOUT_MS)
            settings = dict(chart.defaults)
            shown = _read_label(div)
            assert shown == [chart.label_for(settings)], f"{what}: at {settings} the page shows {shown}"
            _check_not_empty(div, what, settings, shown)
            # Every option of every control, one control at a time, the others back at their defaults.
            for control in chart.controls:
                for value in [*(v for v in control.options if v != control.default), control.default]:
                    settings[control.name] = value
                    _set_control(div, control, value)
                    expected = [chart.label_for(settings)]
                    now = _wait_for_label(div, expected, until_equal=True)
                    assert now == expected, f"{what}: at {settings} the page shows {now}, Python computes {expected}"
                    _check_not_empty(div, what, settings, now)
                    moved += 1
        assert moved, f"chapter {chapter}: no control moved"
        if SCREENSHOTS:
            Path(SCREENSHOTS).mkdir(parents=True, exist_ok=True)
            twins.first.screenshot(path=str(Path(SCREENSHOTS) / f"chapter_{chapter}.png"))
    except AssertionError as e:
        problems.append(str(e).split("\nassert ")[0])
    finally:
        page.close()
    if external:
        problems.append(f"chapter {chapter}: the page asked for what is not on this machine: {sorted(set(external))}")
    errors = [e for e in errors if e not in THEME_ERRORS]
    if errors:
        problems.append(f"chapter {chapter}: JavaScript errors: {errors}")
    assert not problems, "\n".join(problems)


def test_every_page_with_a_twin_is_moved():
    """A new chapter with a static twin (07c, 07d, ...) is in PAGES, so the test above moves its controls too."""
    if not (SITE / "index.html").is_file():
        (pytest.fail if os.environ.get("GEMMLAB_REQUIRE_BROWSER") else pytest.skip)(f"no built site at {SITE}")
    with_twins = {str(p.relative_to(SITE)) for p in SITE.glob("book/*.html") if "data-gemmlab-twin=" in p.read_text()}
    assert with_twins <= set(PAGES.values()), f"pages with a static twin missing from PAGES: {with_twins - set(PAGES.values())}"


def test_outside_the_site_nothing_is_fetched(browser):
    """Where the page has no vegaEmbed (JupyterLab, Colab), a twin loads nothing: no request leaves the machine, and
    its text says that it is the site's version of the control and that the live explorer is the control there."""
    from gemmlab import sitecontrols

    chart = sitecontrols.smem_tiling_twin()
    requests, errors = [], []
    page = browser.new_page()
    page.route("**/*", lambda r: (requests.append(r.request.url), r.abort()))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        page.set_content(f"<html><body>{chart.to_html()}</body></html>")
        page.wait_for_timeout(500)
        text = page.locator(f"#{chart.div_id}").inner_text()
        assert text.splitlines()[0] == sitecontrols.ELSEWHERE, text
        assert page.locator(f"#{chart.div_id} svg").count() == 0
    finally:
        page.close()
    assert not requests, f"asked for: {requests}"
    assert not errors, f"JavaScript errors: {errors}"
