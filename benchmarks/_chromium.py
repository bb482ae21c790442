"""The flags of a headless Chromium driven by Selenium, one list for the explorer benchmark
(``bench_explorer.py --browser``) and the browser tests (``tests/_browser.py``)."""

#: headless, as root in a container (no sandbox; /dev/shm is small there), no GPU, and
#: nothing fetched or shown on a first start; the window size and the profile folder are
#: each caller's own
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-dev-shm-usage",
)
