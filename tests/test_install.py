"""Installed as users install it: the notebooks travel in the sdist and the wheel, `climnb
notebooks` copies them without touching a user's edits, `climnb kernel install` registers a
kernel Jupyter finds and starts, and the wheel, installed into a fresh virtualenv, runs
notebook 00 from outside the clone."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from pathlib import Path

import nbclient
import nbformat
import pytest

import climnb
from climnb.cli import main
from climnb.demo import (
    COPIES_FILE,
    DemoConfig,
    copy_notebooks,
    demo_folders,
    find_notebooks,
    packaged_notebooks,
    run_demo,
)

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = [p.name for p in find_notebooks(ROOT / "notebooks")]
# What a build never needs from the checkout (and the shared venv, a symlink, must not be copied).
_ANYWHERE = shutil.ignore_patterns(
    ".venv", ".git", "build", "dist", "*.egg-info", "__pycache__", ".*_cache", ".ipynb_checkpoints",
)  # fmt: skip
_AT_THE_TOP = {"data", "runs", "reports"}  # the workflow's outputs; climnb/data is source


def NOT_SOURCE(folder, names):
    """:func:`shutil.copytree`'s ``ignore``: what a build never needs, at any depth, and the
    workflow's output folders at the checkout's top only."""
    top = _AT_THE_TOP & set(names) if Path(folder) == ROOT else set()
    return _ANYWHERE(folder, names) | top


def _clean_env(**extra) -> dict[str, str]:
    """This process's environment without what points Python at the clone or the shared venv."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    shared_bin = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep) if p != shared_bin)
    env.update(PYTHONNOUSERSITE="1", TF_CPP_MIN_LOG_LEVEL="2", IPP_NONINTERACTIVE="1", **extra)
    return env


def _run(cmd, **kwargs) -> subprocess.CompletedProcess:
    out = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kwargs)
    assert out.returncode == 0, f"{cmd}\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    return out


# --- climnb notebooks ----------------------------------------------------------------------


def _with_output(folder: Path) -> Path:
    """A notebooks folder whose 00 carries an output and an execution count."""
    folder.mkdir()
    for name in NOTEBOOKS:
        shutil.copy(ROOT / "notebooks" / name, folder / name)
    nb = nbformat.read(folder / NOTEBOOKS[0], as_version=4)
    code = next(c for c in nb.cells if c.cell_type == "code")
    code.outputs = [nbformat.v4.new_output("stream", text="an old output\n")]
    code.execution_count = 7
    nbformat.write(nb, folder / NOTEBOOKS[0])
    return folder


def _actions(done) -> dict[str, str]:
    return {copy.name: copy.action for copy in done}


def test_packaged_notebooks_in_a_clone_are_the_repository_folder():
    assert packaged_notebooks() == ROOT / "notebooks"


def test_copies_every_numbered_notebook_without_outputs(tmp_path):
    source = _with_output(tmp_path / "source")
    done = copy_notebooks(tmp_path / "nb", source=source)
    assert _actions(done) == dict.fromkeys(NOTEBOOKS, "copied")
    for name in NOTEBOOKS:
        nb = nbformat.read(tmp_path / "nb" / name, as_version=4)
        code = [c for c in nb.cells if c.cell_type == "code"]
        assert all(not c.outputs and c.execution_count is None for c in code), name
        assert [c.source for c in nb.cells] == [
            c.source for c in nbformat.read(source / name, as_version=4).cells
        ]
    again = copy_notebooks(tmp_path / "nb", source=source)
    assert _actions(again) == dict.fromkeys(NOTEBOOKS, "up to date")


def test_never_overwrites_a_notebook_the_user_changed(tmp_path):
    dest = tmp_path / "nb"
    copy_notebooks(dest)
    changed, own = dest / NOTEBOOKS[1], dest / NOTEBOOKS[2]
    nb = nbformat.read(changed, as_version=4)
    nb.cells.append(nbformat.v4.new_markdown_cell("my notes"))
    nbformat.write(nb, changed)
    mine = changed.read_bytes()
    record = json.loads((dest / COPIES_FILE).read_text())
    del record["sha256"][own.name]  # as if the user had made a notebook of that name
    (dest / COPIES_FILE).write_text(json.dumps(record))
    own.write_text(own.read_text() + " ")
    own_text = own.read_text()

    done = _actions(copy_notebooks(dest))
    assert done[changed.name] == "kept" and changed.read_bytes() == mine
    assert done[own.name] == "kept" and own.read_text() == own_text
    assert {v for k, v in done.items() if k not in (changed.name, own.name)} == {"up to date"}


def test_refreshes_its_own_unchanged_copy_of_an_older_version(tmp_path):
    """A copy from an earlier climnb, untouched since, is replaced by the new version."""
    old = tmp_path / "old"
    old.mkdir()
    for name in NOTEBOOKS:
        nb = nbformat.read(ROOT / "notebooks" / name, as_version=4)
        nb.cells[0].source += "\n\n(an earlier version)"
        nbformat.write(nb, old / name)
    dest = tmp_path / "nb"
    copy_notebooks(dest, source=old)
    assert _actions(copy_notebooks(dest)) == dict.fromkeys(NOTEBOOKS, "updated")
    assert "(an earlier version)" not in (dest / NOTEBOOKS[0]).read_text()


def test_notebooks_command_says_what_it_kept(tmp_path, capsys):
    dest = tmp_path / "nb"
    assert main(["notebooks", str(dest)]) == 0
    (dest / NOTEBOOKS[0]).write_text((dest / NOTEBOOKS[0]).read_text() + "\n")
    assert main(["notebooks", str(dest)]) == 0
    out = capsys.readouterr().out
    assert f"kept       {NOTEBOOKS[0]}: changed since climnb copied it" in out
    assert f"up to date {NOTEBOOKS[1]}" in out
    assert "rename or delete a kept notebook" in out


def test_notebooks_command_names_each_copy_once_and_sets_the_installed_kernel(tmp_path):
    """Before ``climnb kernel install`` the copies keep the notebooks' kernel and the command
    says how to get climnb's; after it, running the command again sets that kernel."""
    env = _clean_env(JUPYTER_DATA_DIR=str(tmp_path / "jupyter"), PYTHONPATH=str(ROOT))
    command = [sys.executable, "-m", "climnb", "notebooks", tmp_path / "nb"]
    first = _run(command, env=env)
    said = first.stdout + first.stderr
    assert all(said.count(name) == 1 for name in NOTEBOOKS), said
    assert "run `climnb kernel install --user`, then this command again" in first.stdout
    before = nbformat.read(tmp_path / "nb" / NOTEBOOKS[4], as_version=4)
    assert before.metadata.kernelspec.name == "python3"

    _run([sys.executable, "-m", "climnb", "kernel", "install", "--user"], env=env)
    again = _run(command, env=env)
    assert all(again.stdout.count(f"updated    {name}") == 1 for name in NOTEBOOKS), again.stdout
    assert "they open on the kernel 'climnb' (climnb " in again.stdout
    for name in NOTEBOOKS:
        spec = nbformat.read(tmp_path / "nb" / name, as_version=4).metadata.kernelspec
        assert spec.name == "climnb" and spec.display_name.startswith("climnb "), name


def test_notebooks_command_into_a_file_is_one_line_with_status_2(tmp_path, capsys):
    (tmp_path / "afile").write_text("x")
    assert main(["notebooks", str(tmp_path / "afile")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "afile" in err


# --- climnb demo outside a clone -------------------------------------------------------------


def test_demo_outside_a_clone_runs_the_packaged_notebooks_in_the_current_folder(
    tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    assert demo_folders() == (packaged_notebooks(), tmp_path)
    (tmp_path / "notebooks").mkdir()
    shutil.copy(ROOT / "notebooks" / NOTEBOOKS[0], tmp_path / "notebooks")
    assert demo_folders() == (Path("notebooks"), Path("notebooks"))  # the root of a clone
    assert demo_folders("mine") == (Path("mine"), Path("mine"))


@pytest.mark.notebook
def test_demo_writes_data_under_its_working_directory(tmp_path, capfd):
    """The notebook is read from one folder and runs in another: its relative paths land
    there, as ``climnb demo`` outside a clone runs the packaged notebooks. The kernel says
    nothing on the terminal (over TCP, ipykernel warned of eavesdropping at every start)."""
    notebooks = tmp_path / "packaged"
    notebooks.mkdir()
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nb.cells = [
        nbformat.v4.new_code_cell('out = "data/toy/x.txt"', metadata={"tags": ["parameters"]}),
        nbformat.v4.new_code_cell(
            "import pathlib\np = pathlib.Path(out)\np.parent.mkdir(parents=True)\np.write_text('1')"
        ),
    ]
    nbformat.write(nb, notebooks / "00_tiny.ipynb")
    work = tmp_path / "here"
    work.mkdir()
    config = DemoConfig(notebooks=notebooks, reports=work / "reports", workdir=work, parameters={})
    [run] = run_demo(config)
    assert (work / "data/toy/x.txt").read_text() == "1"
    assert not (notebooks / "data").exists()
    assert run.output == work / "reports" / "00_tiny.ipynb" and run.html.exists()
    err = capfd.readouterr().err  # the start's warning; a SIGINT at shutdown may log apart
    assert "eavesdropping" not in err and "[IPKernelApp] WARNING" not in err


# --- climnb kernel install -------------------------------------------------------------------


def _kernel_json(folder: Path) -> dict:
    return json.loads((folder / "kernel.json").read_text())


def test_kernel_install_user_is_listed_by_jupyter(tmp_path):
    env = _clean_env(JUPYTER_DATA_DIR=str(tmp_path / "jupyter"), PYTHONPATH=str(ROOT))
    out = _run(
        [sys.executable, "-m", "climnb", "kernel", "install", "--user", "--name", "climnb-test"],
        env=env,
    )
    folder = tmp_path / "jupyter" / "kernels" / "climnb-test"
    assert f"installed kernel 'climnb-test' (climnb {climnb.__version__} (Python" in out.stdout
    spec = _kernel_json(folder)
    assert spec["argv"][0] == sys.executable and spec["argv"][-2:] == ["-f", "{connection_file}"]
    assert spec["display_name"].startswith(f"climnb {climnb.__version__} (Python 3.")
    scripts = sysconfig.get_path("scripts")
    assert spec["env"] == {"PATH": f"{scripts}{os.pathsep}${{PATH}}", "TF_CPP_MIN_LOG_LEVEL": "2"}
    listed = _run([sys.executable, "-m", "jupyter", "kernelspec", "list", "--json"], env=env)
    found = json.loads(listed.stdout)["kernelspecs"]["climnb-test"]
    assert Path(found["resource_dir"]) == folder
    assert found["spec"]["env"] == spec["env"]


def test_kernel_install_prefix_and_display_name(tmp_path, capsys):
    code = main(
        ["kernel", "install", "--prefix", str(tmp_path), "--name", "Hub.Env", "--display-name", "X"]
    )
    assert code == 0
    spec = _kernel_json(tmp_path / "share/jupyter/kernels/hub.env")  # Jupyter lowercases
    assert spec["display_name"] == "X"
    assert "installed kernel 'hub.env' (X)" in capsys.readouterr().out


@pytest.mark.parametrize(
    "args, message",
    [
        (["--name", "a b"], "Invalid kernel name 'a b'"),
        (["--user", "--prefix", "x"], "not allowed with argument --user"),
    ],
    ids=["bad-name", "user-and-prefix"],
)
def test_kernel_install_bad_options_exit_2(args, message, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(tmp_path))
    try:
        code = main(["kernel", "install", *args])
    except SystemExit as stop:  # argparse's own errors
        code = stop.code
    assert code == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "kernels").exists()


@pytest.mark.notebook
def test_installed_kernel_starts_with_the_environment_first_on_path(tmp_path, monkeypatch):
    """Jupyter fills ``${PATH}`` with its own PATH: the kernel sees this environment's scripts
    folder first, then the server's PATH, and quiet TensorFlow logging."""
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("PATH", f"/opt/site/bin{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "0")
    assert main(["kernel", "install", "--user", "--name", "climnb-path"]) == 0
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(
            "import os, sys\nprint(sys.executable)\nprint(os.environ['TF_CPP_MIN_LOG_LEVEL'])\n"
            "print(*os.environ['PATH'].split(os.pathsep)[:2], sep='\\n')"
        )
    ]
    kept = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        nbclient.NotebookClient(nb, kernel_name="climnb-path", timeout=120).execute()
    finally:  # nbclient's loop.remove_signal_handler leaves Python's defaults, not what was there
        for sig, handler in kept.items():
            signal.signal(sig, handler)
    lines = nb.cells[0].outputs[0]["text"].split()
    assert lines == [sys.executable, "2", sysconfig.get_path("scripts"), "/opt/site/bin"]


# --- the wheel, as a user installs it --------------------------------------------------------


@pytest.fixture(scope="module")
def dist(tmp_path_factory):
    """The sdist of a copy of the checkout, and the wheel built from that sdist (as
    ``python -m build`` does), without build isolation: the shared venv's setuptools.

    The copy is a clone whose notebooks are committed; then notebook 00 on disk gets what
    JupyterLab's autosave would leave: an output, an execution count, a cell not committed."""
    tmp = tmp_path_factory.mktemp("dist")
    src = tmp / "src"
    shutil.copytree(ROOT, src, ignore=NOT_SOURCE)
    git = ["git", "-c", "user.name=climnb", "-c", "user.email=climnb@localhost", "-C", src]
    _run([*git, "init", "-q"])
    _run([*git, "add", "notebooks"])
    _run([*git, "commit", "-q", "-m", "notebooks"])
    autosaved = nbformat.read(src / "notebooks" / NOTEBOOKS[0], as_version=4)
    code = next(c for c in autosaved.cells if c.cell_type == "code")
    code.outputs = [nbformat.v4.new_output("stream", text="an output\n" * 1000)]
    code.execution_count = 3
    autosaved.cells.append(nbformat.v4.new_markdown_cell("not committed"))
    nbformat.write(autosaved, src / "notebooks" / NOTEBOOKS[0])
    # the backend's hooks, as `python -m build` and `pip wheel --no-build-isolation` call them
    build = "import sys, setuptools.build_meta as b; print(b.{}(sys.argv[1]))"
    sdist = (
        tmp
        / _run([sys.executable, "-c", build.format("build_sdist"), tmp], cwd=src).stdout.split()[-1]
    )
    with tarfile.open(sdist) as tar:
        tar.extractall(tmp / "unpacked", filter="data")
    [unpacked] = (tmp / "unpacked").iterdir()
    _run([sys.executable, "-c", build.format("build_wheel"), tmp], cwd=unpacked)
    [wheel] = tmp.glob("climnb-*.whl")
    return Path(sdist), wheel


@pytest.mark.slow
def test_sdist_and_wheel_carry_every_numbered_notebook(dist):
    sdist, wheel = dist
    assert wheel.name == f"climnb-{climnb.__version__}-py3-none-any.whl"
    with tarfile.open(sdist) as tar:
        in_sdist = {Path(n).name for n in tar.getnames() if "/notebooks/" in n}
    with zipfile.ZipFile(wheel) as whl:
        names = whl.namelist()
    in_wheel = {Path(n).name for n in names if n.startswith("climnb/notebooks/")}
    assert in_sdist >= set(NOTEBOOKS) and in_wheel == set(NOTEBOOKS)
    assert all(n.startswith(("climnb/", "climnb-")) for n in names), "only the package"
    # as committed, without outputs, whatever is on disk (see the dist fixture)
    with tarfile.open(sdist) as tar:
        member = next(m for m in tar.getmembers() if m.name.endswith(f"/notebooks/{NOTEBOOKS[0]}"))
        in_sdist_text = tar.extractfile(member).read().decode()
    with zipfile.ZipFile(wheel) as whl:
        in_wheel_text = whl.read(f"climnb/notebooks/{NOTEBOOKS[0]}").decode()
    committed = (ROOT / "notebooks" / NOTEBOOKS[0]).read_text()
    for text in (in_sdist_text, in_wheel_text):
        assert "not committed" not in text and "an output" not in text
        assert json.loads(text) == json.loads(committed)
    assert {"climnb/cli.py", "climnb/runtime/kernel.py", "climnb/commands/notebooks.py"} <= set(
        names
    )


def _fresh_venv(tmp: Path) -> Path:
    """A new virtualenv that sees the shared venv's installed packages, but not climnb, nor
    Horovod (which pip cannot install with the wheel: a hub environment may well lack it).

    Installing the wheel's dependencies for real would download and unpack about 2 GB
    (TensorFlow) and build Horovod again. Instead the new venv gets a ``.pth`` line naming a
    folder of links to every distribution of the shared venv except climnb itself (its
    editable install) and setuptools. The venv is made without pip (``ensurepip`` takes
    seconds to install its own copy): ``venv/bin/python -m pip`` is the shared pip, seen
    through the links, and installs into the venv it runs in. pip then treats the linked
    distributions as installed, so ``pip install --no-index WHEEL`` resolves the wheel's declared
    dependencies against them and fails if one is missing, and it installs climnb, its
    console script and its notebooks into the new venv only. The dependencies' data files
    (``share/jupyter``: nbconvert's templates, ...) are linked too, but not their console
    scripts (``jupyter``, ``papermill``): the test runs those as ``python -m``.
    """
    shared = Path(sysconfig.get_path("purelib"))
    view = tmp / "shared-site-packages"
    view.mkdir()
    skip = ("climnb", "__editable__", "setuptools", "_distutils_hack", "__pycache__", "horovod")
    for entry in shared.iterdir():
        if not entry.name.lower().startswith(skip) and entry.suffix != ".pth":
            (view / entry.name).symlink_to(entry)
    venv = tmp / "venv"
    _run([sys._base_executable, "-m", "venv", "--without-pip", venv], env=_clean_env())
    purelib = _run(
        [venv / "bin/python", "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        env=_clean_env(),
    ).stdout.strip()
    (Path(purelib) / "shared_packages.pth").write_text(f"{view}\n")
    data = venv / "share/jupyter"  # their data files: nbconvert's templates, JupyterLab's assets
    data.mkdir(parents=True)
    for entry in (Path(sys.prefix) / "share/jupyter").iterdir():
        if entry.name != "kernels":
            (data / entry.name).symlink_to(entry)
    return venv


@pytest.mark.slow
@pytest.mark.notebook
def test_wheel_in_a_fresh_venv_runs_notebook_00_outside_the_clone(dist, tmp_path):
    """pip installs the wheel with its dependencies (see :func:`_fresh_venv`); then, in a
    folder outside the clone: ``climnb notebooks``, ``climnb kernel install --user`` and
    notebook 00 under papermill with that kernel."""
    _, wheel = dist
    venv = _fresh_venv(tmp_path)
    home = tmp_path / "home"
    home.mkdir()
    env = _clean_env(HOME=str(home), JUPYTER_DATA_DIR=str(home / "jupyter"))
    # not activated, as under a hub whose server runs elsewhere: the kernel spec adds venv/bin
    python, climnb_cmd = venv / "bin/python", venv / "bin/climnb"
    pip = [python, "-m", "pip", "--disable-pip-version-check", "--no-input"]
    _run([*pip, "install", "--no-index", "-q", wheel], env=env, cwd=home)

    where = _run([python, "-c", "import climnb; print(climnb.__file__)"], env=env, cwd=home)
    assert Path(where.stdout.strip()).is_relative_to(venv), "climnb from the wheel"
    version = _run([climnb_cmd, "--version"], env=env, cwd=home).stdout.strip()
    assert version == f"climnb {climnb.__version__}"

    _run([climnb_cmd, "kernel", "install", "--user"], env=env, cwd=home)
    copied = _run([climnb_cmd, "notebooks", "nb"], env=env, cwd=home).stdout
    assert f"from {Path(where.stdout.strip()).parent / 'notebooks'}" in copied
    assert sorted(p.name for p in (home / "nb").glob("*.ipynb")) == NOTEBOOKS
    opens_on = nbformat.read(home / "nb" / NOTEBOOKS[0], as_version=4).metadata.kernelspec
    assert opens_on.name == "climnb"
    spec = _kernel_json(home / "jupyter/kernels/climnb")
    assert spec["argv"][0] == str(python)
    assert spec["env"]["PATH"] == f"{venv / 'bin'}{os.pathsep}${{PATH}}"
    # `jupyter kernelspec list`; the dependencies' console scripts are not in this venv's bin
    kernelspec = [python, "-m", "jupyter_client.kernelspecapp"]
    listed = _run([*kernelspec, "list"], env=env, cwd=home).stdout
    assert str(home / "jupyter/kernels/climnb") in listed

    papermill = [python, "-m", "papermill", "--no-progress-bar", "-k", "climnb", "--cwd", "nb"]
    # notebook 00 with a last cell that says where the kernel runs: one kernel start, not two
    notebook = nbformat.read(home / "nb/00_quickstart.ipynb", as_version=4)
    notebook.cells.append(
        nbformat.v4.new_code_cell(
            "import os, sys, climnb\nprint(sys.executable, climnb.__file__, os.environ['PATH'])"
        )
    )
    nbformat.write(notebook, home / "nb/00_quickstart.ipynb")
    out = home / "nb/00_quickstart.out.ipynb"
    _run([*papermill, "nb/00_quickstart.ipynb", out], env=env, cwd=home)  # its toy defaults
    executed = nbformat.read(out, as_version=4)
    outputs = [o for c in executed.cells[:-1] for o in c.get("outputs", [])]  # 00's own
    assert outputs and not [o for o in outputs if o.output_type == "error"]
    kernel_python, kernel_climnb, kernel_path = executed.cells[-1].outputs[0].text.split()
    assert kernel_python == str(python) and Path(kernel_climnb).is_relative_to(venv)
    assert kernel_path == f"{venv / 'bin'}{os.pathsep}{env['PATH']}"
    assert (home / "nb/data/toy/fields.nc").stat().st_size > 10_000  # run in the notebooks folder


@pytest.mark.slow
@pytest.mark.notebook
def test_wheel_without_horovod_trains_notebook_04_in_one_process(dist, tmp_path):
    """The wheel in a fresh venv without Horovod: notebook 04 says so in one line, trains on
    one engine (one rank) and writes the model bundle, at toy size."""
    _, wheel = dist
    venv = _fresh_venv(tmp_path)
    home = tmp_path / "home"
    home.mkdir()
    env = _clean_env(HOME=str(home), JUPYTER_DATA_DIR=str(home / "jupyter"))
    python, climnb_cmd = venv / "bin/python", venv / "bin/climnb"
    pip = [python, "-m", "pip", "--disable-pip-version-check", "--no-input"]
    _run([*pip, "install", "--no-index", "-q", wheel], env=env, cwd=home)
    no_horovod = "import importlib.util as u; print(u.find_spec('horovod'))"
    assert _run([python, "-c", no_horovod], env=env, cwd=home).stdout.strip() == "None"
    _run([climnb_cmd, "kernel", "install", "--user"], env=env, cwd=home)
    _run([climnb_cmd, "notebooks", "nb"], env=env, cwd=home)

    notebook = "nb/04_distributed_training.ipynb"
    out = home / "nb/04.out.ipynb"
    tiny = "model_overrides: {growth_rate: 4, initial_filters: 8, blocks: [1, 1]}"
    papermill = [python, "-m", "papermill", "--no-progress-bar", "--cwd", "nb", notebook, out]
    settings = ["-p", "epochs", "1", "-p", "max_steps", "2", "-p", "launcher", "local"]
    _run([*papermill, *settings, "-y", tiny], env=env, cwd=home, timeout=900)  # its kernel
    executed = nbformat.read(out, as_version=4)
    assert executed.metadata.kernelspec.name == "climnb"
    outputs = [o for c in executed.cells for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.output_type == "error"]
    text = "".join(o.get("text", "") for o in outputs)
    said = [line for line in text.splitlines() if "Horovod is not installed" in line]
    assert len(said) == 1 and said[0].startswith("1 local engine, "), said
    assert "training in one process without it (to train on several: " in said[0]
    assert (home / "nb/runs/toy/model/climnb.json").is_file()
