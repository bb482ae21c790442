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
    for host in ("cdnjs.cloudflare.com", "unpkg.com", "cdn.bokeh.org"):
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
