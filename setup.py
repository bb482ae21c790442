"""Packages of the wheel; everything else is declared in pyproject.toml.

Only what pyproject.toml cannot say: the top-level notebooks/ folder becomes the data-only
package ``climnb.notebooks``, so the numbered notebooks are installed with climnb while the
repository keeps them where people look for them. The wheel and the sdist carry each notebook
as committed (git's HEAD, in a clone that tracks it; else as on disk, in an unpacked sdist),
without outputs or execution counts, whatever JupyterLab last saved on disk.
"""

import json
import subprocess
from pathlib import Path

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist

HERE = Path(__file__).resolve().parent
NOTEBOOKS = "[0-9][0-9]_*.ipynb"


def _committed(notebook: Path) -> str:
    """The notebook's text at git's HEAD where this folder is a clone that tracks it."""

    def git(*args):
        return subprocess.run(
            ["git", *args], cwd=HERE, capture_output=True, text=True, check=True
        ).stdout

    try:
        if Path(git("rev-parse", "--show-toplevel").strip()).resolve() == HERE:
            return git("show", f"HEAD:notebooks/{notebook.name}")
    except (OSError, subprocess.CalledProcessError):  # no git, not a clone, or not tracked
        pass
    return notebook.read_text(encoding="utf-8")


def _clean(text: str) -> str:
    nb = json.loads(text)
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            cell["outputs"], cell["execution_count"] = [], None
    return json.dumps(nb, indent=1, ensure_ascii=False) + "\n"


def _rewrite(folder: Path) -> None:
    """Replace each numbered notebook in ``folder`` (a build or release tree) by its clean
    committed text; unlinked first, as the tree may hold hard links to the clone's files."""
    for copy in sorted(folder.glob(NOTEBOOKS)):
        text = _clean(_committed(HERE / "notebooks" / copy.name))
        copy.unlink()
        copy.write_text(text, encoding="utf-8")


class BuildPy(build_py):
    def run(self):
        super().run()
        if not getattr(self, "editable_mode", False):  # editable: the clone's own files
            _rewrite(Path(self.build_lib) / "climnb" / "notebooks")


class Sdist(sdist):
    def make_release_tree(self, base_dir, files):
        super().make_release_tree(base_dir, files)
        _rewrite(Path(base_dir) / "notebooks")


setup(
    packages=[*find_packages(include=["climnb", "climnb.*"]), "climnb.notebooks"],
    package_dir={"climnb.notebooks": "notebooks"},
    cmdclass={"build_py": BuildPy, "sdist": Sdist},
)
