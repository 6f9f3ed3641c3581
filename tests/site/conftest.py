"""The browser tests of the built site (tests/site): `python -m pytest -m browser tests/site` after `make site`."""


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "browser: opens the built site (_build/html, or $GEMMLAB_SITE) in headless Chromium through "
                   "Playwright; skipped when the site or /usr/bin/chromium is missing")
