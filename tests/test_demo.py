"""Demo reports: executed notebooks rendered to HTML that loads no script from elsewhere."""

from __future__ import annotations

import re

import nbformat
import pytest

from climnb.demo import render_html, run_notebook

# a script or stylesheet loaded from another host (http:, https: or protocol-relative)
EXTERNAL = re.compile(r"<(script|link)\b[^>]*\b(src|href)\s*=\s*[\"']?(https?:)?//", re.I)


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    """A small notebook like the demo's (inline BokehJS, a HoloViews plot, a tqdm bar widget,
    Markdown with math), executed with papermill and rendered by the demo."""
    folder = tmp_path_factory.mktemp("report")
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nb.cells = [
        nbformat.v4.new_markdown_cell("# A report\n\nThe IoU $|A \\cap B| / |A \\cup B|$."),
        nbformat.v4.new_code_cell("n = 3", metadata={"tags": ["parameters"]}),
        nbformat.v4.new_code_cell(
            'import holoviews as hv\nimport numpy as np\n\nhv.extension("bokeh", inline=True)'
        ),
        nbformat.v4.new_code_cell("hv.Image(np.arange(12.0).reshape(3, 4))"),
        nbformat.v4.new_code_cell(
            "from tqdm.auto import tqdm\n\nfor _ in tqdm(range(n)):\n    pass"
        ),
    ]
    nbformat.write(nb, folder / "07_report.ipynb")
    return run_notebook(folder / "07_report.ipynb", folder / "reports", parameters={"n": 5})


@pytest.mark.notebook
def test_report_html_loads_no_external_script(report):
    executed = nbformat.read(report.output, as_version=4)
    assert "widgets" in executed.metadata  # the tqdm bar is a widget in the notebook
    html = report.html.read_text()
    assert not EXTERNAL.search(html), EXTERNAL.search(html).group(0)
    for host in ("cdnjs.cloudflare.com", "unpkg.com", "cdn.bokeh.org", "cdn.holoviz.org"):
        assert host not in html
    # what the page shows: the plot with BokehJS inline, the bar's last state as text
    assert "Bokeh.embed" in html and len(html) > 1_000_000
    assert re.search(r"100%\|#+\|\s5/5", html)
    assert "application/vnd.jupyter.widget" not in html


@pytest.mark.notebook
@pytest.mark.filterwarnings("ignore:Your element with mimetype")
def test_nbconverts_default_page_would_load_cdn_scripts(report):
    """The check above can fail: nbconvert's default page of the same notebook loads
    require.js and MathJax from a CDN."""
    import nbconvert

    executed = nbformat.read(report.output, as_version=4)
    default, _ = nbconvert.HTMLExporter().from_notebook_node(executed)
    assert EXTERNAL.search(default)
    assert EXTERNAL.search(render_html(executed)) is None


@pytest.mark.notebook
@pytest.mark.browser
def test_report_renders_in_a_browser_without_network(report, tmp_path):
    """Headless Chromium with every connection sent to a closed port opens the report from
    disk: BokehJS runs from the page itself and draws the plot, and nothing fails to load
    (nbconvert's default page fails on require.js, MathJax, the widget manager and Panel's
    stylesheets from cdn.holoviz.org)."""
    import shutil
    import socket
    import time

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver_path = shutil.which("chromedriver")
    pytest.importorskip("selenium", reason="selenium not installed")
    if not (chromium and driver_path):
        pytest.skip("Debian chromium and chromium-driver not installed")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    with socket.socket() as s:  # a port nothing listens on: every fetch from elsewhere fails
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-first-run",
        "--disable-background-networking",
        f"--proxy-server=127.0.0.1:{closed}",
        "--proxy-bypass-list=<-loopback>",
        f"--user-data-dir={tmp_path / 'profile'}",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    try:
        driver.get(report.html.as_uri())
        deadline, views = time.monotonic() + 60, 0
        while time.monotonic() < deadline and not views:
            views = driver.execute_script(
                "return window.Bokeh && Bokeh.index ? Object.keys(Bokeh.index).length : 0"
            )
            time.sleep(0.5)
        log = driver.get_log("browser")
    finally:
        driver.quit()
    assert views > 0, [e["message"] for e in log][-5:]
    failed = [e["message"] for e in log if "Failed to load" in e["message"]]
    assert not failed
