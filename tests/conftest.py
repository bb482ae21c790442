"""Shared fixtures: toy-size synthetic data made once per session, and MPI environment."""

from __future__ import annotations

import os
import shutil
import signal
import sys
import threading
import warnings
from pathlib import Path

import pytest

# Two pytest workers share two cores: each process computes on one thread (TensorFlow's pools,
# OpenMP/oneDNN, OpenBLAS), so that two in-process TensorFlow tests do not run four spinning
# threads on two cores. Set before anything loads TensorFlow or numpy's BLAS; children (MPI
# ranks, engines, kernels) inherit it; the training code sets its own threads where asked.
for _var in (
    "TF_NUM_INTRAOP_THREADS",
    "TF_NUM_INTEROP_THREADS",
    "OMP_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
):
    os.environ.setdefault(_var, "1")

# climnb (xarray, pandas, scipy: ~1.5 s) loads in the fixtures that need it: the pytest process
# that only hands tests to the xdist workers never does, and it starts them sooner

VENV_BIN = Path(sys.executable).parent
#: Node ids of the tests marked ``slow`` here (measured; see the file's header).
SLOW_TESTS = frozenset(
    line.strip()
    for line in (Path(__file__).parent / "slow_tests.txt").read_text().splitlines()
    if line.strip() and not line.startswith("#")
)
#: Numbers of the notebooks that a selected test runs end to end in JupyterLab (test_browser).
RUN_IN_BROWSER = pytest.StashKey[set]()


def write_chain_expert_folder(work) -> None:
    """A ClimateNet-layout folder ``climatenet`` in ``work`` for the notebook chain's 01 (its
    ``expert`` parameter): 00's first 6 steps (seed 0, the toy grid) labelled by three
    labellers, labeller 2 skipping the last step."""
    from climnb.labels.expert import write_expert_folder

    write_expert_folder(Path(work) / "climatenet", n_time=6, seed=0, skip=[(5, 2)])


def check_expert_scores(text: str) -> None:
    """Notebook 01's output shows the heuristic labels scored against each labeller, the
    consensus rules and labeller against labeller (the folder of
    :func:`write_chain_expert_folder`)."""
    assert "no expert labels given" not in text
    table = text[text.index("heuristic labels") :]
    for row in ("labeller 0", "labeller 2", "majority", "union"):
        assert row in table, f"{row!r} missing from notebook 01's expert scores"


def browser_missing() -> str | None:
    """Why the browser tests cannot run here (what to install), or None."""
    if not (shutil.which("chromium") or shutil.which("chromium-browser")):
        return "chromium not found: apt-get install chromium chromium-driver"
    if shutil.which("chromedriver") is None:
        return "chromedriver not found: apt-get install chromium-driver"
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium not installed: pip install selenium"
    return None


#: SIGINT's handler when the tests began (Python's KeyboardInterrupt).
_SIGINT = signal.getsignal(signal.SIGINT)


@pytest.fixture(autouse=True)
def _sigint_kept():
    """A test that leaves SIGINT changed (ignored: every command started later would be deaf
    to Ctrl-C, since an ignored signal survives exec; or a library's own handler) changes the
    tests after it: put back the handler the tests began with and say which test it was."""
    yield
    if threading.current_thread() is not threading.main_thread():
        return
    after = signal.getsignal(signal.SIGINT)
    if after is not _SIGINT:
        signal.signal(signal.SIGINT, _SIGINT)
        warnings.warn(f"this test left SIGINT's handler at {after!r}; put back", stacklevel=1)


@pytest.fixture(scope="session")
def toy():
    """Eight toy-size (96 x 144) steps with 3 storms and 3 rivers: ``(ds, events)``."""
    from climnb.data.synthetic import make_dataset

    return make_dataset(n_time=8, seed=11)


@pytest.fixture(scope="session")
def mpi_env():
    """Environment for launching the tests' MPI programs (two ranks): OpenMPI's settings for
    this machine from :func:`climnb.runtime.cluster.mpi_settings`, and the venv first on PATH.
    """
    from climnb.runtime.cluster import mpi_settings

    if shutil.which("mpirun") is None:
        pytest.skip("mpirun not found: install OpenMPI (make setup does it with apt as root)")
    env = {**os.environ, **mpi_settings(2)}
    env["PATH"] = f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}"
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    return env


@pytest.fixture
def mpi_environ(mpi_env, monkeypatch):
    """:func:`mpi_env` applied to this process, for engines started from the tests (they
    inherit it); no Slurm variables, no interactive progress widgets."""
    from climnb.runtime.cluster import mpi_settings

    for key in (*mpi_settings(2), "PATH", "TF_CPP_MIN_LOG_LEVEL"):
        if key in mpi_env:
            monkeypatch.setenv(key, mpi_env[key])
    for key in [k for k in os.environ if k.startswith("SLURM_")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("IPP_NONINTERACTIVE", "1")
    return mpi_env


#: Seconds each slow module took (summed phases, 2 xdist workers, idle 2-core Xeon, full run of
#: 2026-11-27 04:15), for ordering a first run; later runs use what the last run measured
#: (pytest's cache). test_notebooks runs only what the browser chain does not.
MODULE_SECONDS = {
    "test_browser.py": 255,
    "test_train.py": 102,
    "test_browser_annotate.py": 60,
    "test_slurm.py": 97,
    "test_bad_input.py": 49,
    "test_train_staged.py": 45,
    "test_train_safety.py": 35,
    "test_init_from.py": 35,
    "test_install.py": 34,
    "test_option_effects.py": 30,
    "test_train_option_effects.py": 25,
    "test_label_parallel.py": 30,
    "test_sampleset.py": 28,
    "test_expert_samples.py": 28,
    "test_cluster.py": 28,
    "test_horovod.py": 26,
    "test_staging.py": 25,
    "test_train_best.py": 22,
    "test_stats.py": 20,
    "test_viz_explorer.py": 19,
    "test_scheduler.py": 19,
    "test_predict.py": 17,
    "test_models_fused_bn.py": 15,
    "test_demo.py": 15,
    "test_stats_change.py": 14,
    "test_viz_notebook.py": 13,
    "test_no_leakage.py": 12,
    "test_stats_cli.py": 11,
    "test_models_training.py": 11,
    "test_setup.py": 10,
    "test_models_poleward.py": 9,
    "test_models.py": 9,
    "test_interrupt.py": 8,
}
_CACHE_KEY = "climnb/test-seconds"
_measured: dict[str, float] = {}


def _module(nodeid: str) -> str:
    return nodeid.split("::", 1)[0].rsplit("/", 1)[-1]


def pytest_configure(config):
    """Keep the collection order below when pytest-xdist hands out modules (its default
    reorders them by their number of tests, which starts a module of 6 long tests last)."""
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


@pytest.hookimpl(tryfirst=True)  # before -m selects
def pytest_collection_modifyitems(session, config, items):
    """Mark the tests of ``slow_tests.txt`` ``slow``; order the modules longest first, so
    that with ``-n 2 --dist loadfile`` the two workers end together (tests keep their order
    within a module). A module's cost: its tests' seconds in the runs before (pytest's cache;
    1 s for a test never run), else :data:`MODULE_SECONDS`."""
    for item in items:
        if item.nodeid in SLOW_TESTS:
            item.add_marker(pytest.mark.slow)
    cache = getattr(config, "cache", None)  # None with -p no:cacheprovider
    cached = cache.get(_CACHE_KEY, {}) if cache else {}
    tests: dict[str, list[str]] = {}
    for item in items:
        tests.setdefault(_module(item.nodeid), []).append(item.nodeid)
    cost = {
        module: sum(cached.get(n, 1.0) for n in ids)
        if any(n in cached for n in ids)
        else MODULE_SECONDS.get(module, len(ids))
        for module, ids in tests.items()
    }
    order = {module: i for i, module in enumerate(tests)}
    items.sort(key=lambda it: (-cost[_module(it.nodeid)], order[_module(it.nodeid)]))


def pytest_collection_finish(session):
    """Note which notebooks a selected browser test runs (``runs_notebook`` marks), so that
    tests/test_notebooks.py does not run them a second time."""
    covered = set()
    if browser_missing() is None:
        for item in session.items:
            covered.update(m.args[0] for m in item.iter_markers("runs_notebook"))
    session.config.stash[RUN_IN_BROWSER] = covered


def pytest_runtest_logreport(report):
    """Sum each test's seconds (for :func:`pytest_collection_modifyitems` next time); with
    ``CLIMNB_TEST_TIMES=FILE``, also append each test phase's seconds to FILE as it ends
    (survives a killed run, unlike ``--durations``; for finding what makes the suite slow:
    seconds, phase, outcome, test, start (epoch seconds), xdist worker)."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return  # the controller gets the same report
    _measured[report.nodeid] = _measured.get(report.nodeid, 0.0) + report.duration
    path = os.environ.get("CLIMNB_TEST_TIMES")
    if path:
        with open(path, "a") as f:
            node = getattr(report, "node", None)
            worker = node.gateway.id if node is not None else "-"
            f.write(
                f"{report.duration:8.2f}\t{report.when}\t{report.outcome}\t{report.nodeid}"
                f"\t{getattr(report, 'start', 0.0):.1f}\t{worker}\n"
            )


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """With ``CLIMNB_TEST_CPU=FILE``, append each test's CPU seconds to FILE: this process's
    (setup, call and teardown) and its children's that were waited for (subprocess.run, engines
    and kernels reaped), as ``own, children, test``: on a loaded machine the wall seconds of
    ``CLIMNB_TEST_TIMES`` say little about what a test costs."""
    path = os.environ.get("CLIMNB_TEST_CPU")
    if not path:
        yield
        return
    import resource

    def used():
        own = resource.getrusage(resource.RUSAGE_SELF)
        kids = resource.getrusage(resource.RUSAGE_CHILDREN)
        return own.ru_utime + own.ru_stime, kids.ru_utime + kids.ru_stime

    before = used()
    yield
    after = used()
    with open(path, "a") as f:
        f.write(f"{after[0] - before[0]:8.2f}\t{after[1] - before[1]:8.2f}\t{item.nodeid}\n")


def pytest_sessionfinish(session, exitstatus):
    """Store the tests' seconds measured in this run (tests not run keep theirs)."""
    config = session.config
    if os.environ.get("PYTEST_XDIST_WORKER") or not _measured or not hasattr(config, "cache"):
        return
    config.cache.set(_CACHE_KEY, {**config.cache.get(_CACHE_KEY, {}), **_measured})
