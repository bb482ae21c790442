"""Bad input to every ``climnb`` subcommand: exit status 2, one error line naming the file and
the problem, and no file changed (the table is in ``tests/bad_input_cases.py``)."""

from __future__ import annotations

import pytest
from bad_input_cases import CASES, Case, Unavailable, judge, make_golden, run_case

pytest.importorskip(
    "keras", reason="the predict cases need a model bundle: pip install 'climnb[train]'"
)

# whose area each case is in (the branches of this session)
ENGINEER = {"sampleset": "A", "training": "B", "realdata": "C", "pangeo": "E", "lead": "lead"}

# Cases the code did not handle when the table was last run (`benchmarks/bench_reliability.py
# --xfail` lists them); strict, so that a fix makes its case fail until its entry goes.
UNHANDLED: dict[str, str] = {}  # none left


def _param(case: Case):
    if case.id not in UNHANDLED:
        return pytest.param(case, id=case.id)
    owner = f"owner {case.owner} (engineer {ENGINEER[case.owner]})"
    mark = pytest.mark.xfail(strict=True, reason=f"{owner}: {UNHANDLED[case.id]}")
    return pytest.param(case, id=case.id, marks=mark)


@pytest.fixture(scope="module")
def golden(tmp_path_factory):
    return make_golden(tmp_path_factory.mktemp("golden"))


@pytest.mark.parametrize("case", [_param(c) for c in CASES])
def test_bad_input_is_refused(case, golden, tmp_path_factory):
    folder = tmp_path_factory.mktemp("c")  # a neutral name: the error must name the case's file
    try:
        outcome = run_case(case, folder, golden)
    except Unavailable as err:
        pytest.skip(f"cannot set this case up here: {err}")
    problems = judge(case, outcome)
    assert not problems, (
        f"climnb {' '.join(outcome.argv)}\n  "
        + "\n  ".join(problems)
        + f"\nstderr:\n{outcome.stderr}"
    )


def test_the_table_covers_every_subcommand_with_40_cases():
    from climnb.cli import build_parser

    parser = build_parser()
    commands = set(next(a for a in parser._actions if a.dest == "command").choices)
    covered = {c.command for c in CASES}
    assert commands - {"versions"} <= covered, commands - covered  # versions takes no input
    assert len(CASES) >= 40
    assert len({c.id for c in CASES}) == len(CASES)
    assert set(UNHANDLED) <= {c.id for c in CASES}


def test_judge_sees_success_output_and_leftovers(golden, tmp_path):
    """The harness itself: a command that works and writes a file is not 'handled'."""

    def valid(c):
        return ["synth", "--out", c.p("f.nc"), "--n-time", "2"]

    def zero(c):
        return ["synth", "--out", c.p("f.nc"), "--n-time", "0"]

    ok = Case("synth-valid", "lead", valid, ("f.nc",), "x")
    problems = judge(ok, run_case(ok, tmp_path / "ok", golden))
    assert any("exit status 0" in p for p in problems)
    assert any("files changed" in p and "+f.nc" in p for p in problems)
    refused = Case("synth-zero", "lead", zero, ("n_time",), "positive")
    outcome = run_case(refused, tmp_path / "refused", golden)
    assert judge(refused, outcome) == [], outcome.stderr
