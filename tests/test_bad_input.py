"""Bad input to every ``climnb`` subcommand: exit status 2, one error line naming the file and
the problem, and no file changed (the table is in ``tests/bad_input_cases.py``)."""

from __future__ import annotations

import os
import time

import pytest
from bad_input_cases import CASES, Case, Unavailable, _diff, judge, make_golden, run_case, snapshot

pytest.importorskip(
    "keras", reason="the predict cases need a model bundle: pip install 'climnb[train]'"
)

# Cases the code did not handle when the table was last run (`benchmarks/bench_reliability.py
# --xfail` lists them); strict, so that a fix makes its case fail until its entry goes.
UNHANDLED: dict[str, str] = {}  # none left


def _param(case: Case):
    if case.id not in UNHANDLED:
        return pytest.param(case, id=case.id)
    mark = pytest.mark.xfail(strict=True, reason=UNHANDLED[case.id])
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

    ok = Case("synth-valid", valid, ("f.nc",), "x")
    problems = judge(ok, run_case(ok, tmp_path / "ok", golden))
    assert any("exit status 0" in p for p in problems)
    assert any("files changed" in p and "+f.nc" in p for p in problems)
    refused = Case("synth-zero", zero, ("n_time",), "positive")
    outcome = run_case(refused, tmp_path / "refused", golden)
    assert judge(refused, outcome) == [], outcome.stderr


def test_snapshot_sees_a_rewrite_in_place_of_the_same_size(tmp_path):
    """The harness's snapshot (inode, size, modification time) sees a command that rewrites
    bytes of an input in place, leaving its size, and one that replaces it."""
    (tmp_path / "a.nc").write_bytes(b"x" * 100)
    (tmp_path / "b.nc").write_bytes(b"x" * 100)
    before = snapshot(tmp_path)
    time.sleep(0.05)  # past the file system clock's tick (a command starts later than this)
    with open(tmp_path / "a.nc", "r+b") as f:
        f.write(b"y")
    (tmp_path / "b.new").write_bytes(b"x" * 100)
    os.replace(tmp_path / "b.new", tmp_path / "b.nc")
    assert _diff(before, snapshot(tmp_path)) == ["~a.nc", "~b.nc"]


# --- the one output rule (climnb.io.outputs.check_output), seen through every command that writes

_STAGE = ["--ranks-per-node", "1", "--samples-per-rank", "4", "--no-mpi", "--no-progress"]
WRITERS = {  # command -> (kind of output, argv(ctx, out[, fields]))
    "label": (
        "file",
        lambda c, out, f=None: ["label", f or c.fields(), "--out", out, "--no-progress"],
    ),
    "predict": (
        "file",
        lambda c, out, f=None: [
            "predict",
            "--model",
            str(c.g.bundle),
            f or c.fields(),
            "--out",
            out,
        ],
    ),
    "tracks": ("file", lambda c, out, f=None: ["tracks", f or c.fields(), "--out", out]),
    "samples": ("folder", lambda c, out: ["samples", "--input", c.fields(), "--out", out]),
    "stage": (
        "folder",
        lambda c, out: ["stage", "--source", str(c.samples() / "train"), "--dest", out, *_STAGE],
    ),
}
OPTION = {"stage": "--dest"}


def _bad_output(c, command: str, situation: str) -> tuple[str, str]:
    """(output path, the error line's expected wording) of ``situation``."""
    kind = WRITERS[command][0]
    if situation == "under-a-file":
        c.text("plainfile", "a regular file\n")
        return c.p("plainfile/sub/out"), r"cannot write in \S*plainfile \(not a directory\)"
    if situation == "wrong-kind":
        if kind == "file":
            return c.dir("outdir"), r"outdir is a directory; give a file name"
        return c.text("plainfile", "x\n"), r"plainfile exists and is not a directory"
    if situation == "is-an-input" and command == "stage":  # the source folder
        return str(c.d / "samples" / "train"), r"train is an input \(\S*train\); refusing"
    if situation == "is-an-input":
        return c.p("fields.nc"), r"fields.nc is an input \(\S*fields.nc\); refusing"
    if situation == "holds-an-input":  # a folder output with the input in it
        return str(c.d), rf"{c.d} is not empty; use --overwrite"
    raise AssertionError(situation)


RULE_CASES = [
    (command, situation)
    for command, (kind, _) in WRITERS.items()
    for situation in ("under-a-file", "wrong-kind", "is-an-input", "holds-an-input")
    if (command, situation) not in {("samples", "is-an-input"), ("stage", "holds-an-input")}
    and not (kind == "file" and situation == "holds-an-input")
]


@pytest.mark.parametrize("command,situation", RULE_CASES)
def test_one_output_rule_for_every_command(command, situation, golden, tmp_path):
    """The same bad output gets the same refusal, worded alike, from every command (before
    the one rule, label said "folder ... does not exist" under a file, stage a bare OSError)."""
    kind, argv = WRITERS[command]
    expected = []

    def build(c):
        out, wording = _bad_output(c, command, situation)
        expected.append(wording)
        return argv(c, out)

    names = (OPTION.get(command, "--out"),)
    outcome = run_case(Case(f"{command}-{situation}", build, names, "."), tmp_path, golden)
    problems = judge(Case(f"{command}-{situation}", build, names, expected[0]), outcome)
    assert not problems, "\n".join(problems) + f"\nstderr:\n{outcome.stderr}"


@pytest.mark.parametrize("command", list(WRITERS))
def test_a_missing_parent_folder_is_created(command, golden, tmp_path):
    """The rule's one kindness: ``--out new/sub/x`` makes ``new/sub`` (label refused it)."""
    kind, argv = WRITERS[command]
    name = {"file": "new/sub/out.nc", "folder": "new/sub/out"}[kind]
    name += "{node}" if command == "stage" else ""  # stage's --dest pattern: node 0 here

    def build(c):
        if kind == "folder":  # samples: the 40 steps a split needs
            return argv(c, c.p(name))
        # a file from 4 of the steps: the folder is made the same way, without seconds of work
        return argv(c, c.p(name), c.fields(change=lambda ds: ds.isel(time=slice(0, 4))))

    ctx = Case("ok", build, (), ".")
    outcome = run_case(ctx, tmp_path, golden)
    assert outcome.status == 0 and not outcome.raised, outcome.stderr + outcome.raised
    made = tmp_path / name.replace("{node}", "0")
    assert made.is_file() if kind == "file" else any(made.iterdir())
