"""No command modifies its inputs: every output option of every command, aimed at every input
the command reads (the same path, a symbolic link, a hard link, a member of an input glob, a
file in an input folder) or at another output of the same command, is refused before any work
(exit status 2, one line naming the option) and every file under the case's folder is left as
it was (inode, size and modification time, :func:`bad_input_cases.snapshot`)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from bad_input_cases import Case, Ctx, judge, make_golden, run_case

pytest.importorskip("keras", reason="predict's cases need a model bundle")

SAME = r"is an input|is inside the input|hard link|same file as|holds the input"


@dataclass(frozen=True)
class Command:
    """``inputs(c, golden_extra)`` makes the inputs (name -> path) in the case's folder;
    ``argv(inputs, outputs)`` is the command line, ``outputs`` (option -> path) overriding the
    defaults; ``outputs``: the output options; ``globbed``: the inputs the command also takes
    as a glob; ``folders``: inputs that are folders."""

    inputs: Callable
    argv: Callable
    outputs: tuple[str, ...]
    globbed: tuple[str, ...] = ()
    folders: tuple[str, ...] = ()


def _fields(c, x):
    return {"fields": c.fields()}


def _stats_inputs(c, x):
    return {
        "mask": c.fields(),
        "fields": c.fields("rain.nc"),
        "tracks": str(shutil.copyfile(x["tracks"], c.d / "tracks.nc")),
    }


def _compare_inputs(c, x):
    return {
        "a": c.fields("a.nc"),
        "b": c.fields("b.nc"),
        "fa": c.fields("fa.nc"),
        "fb": c.fields("fb.nc"),
    }


def _score_inputs(c, x):
    expert = c.d / "expert"
    shutil.copytree(x["expert"], expert)
    return {"mask": c.fields(), "expert": str(expert)}


def _predict_inputs(c, x):
    model = c.d / "model"
    shutil.copytree(c.g.bundle, model)
    return {"fields": c.fields(), "model": str(model)}


def _get(out, option, default):
    return str(out.get(option, default))


COMMANDS = {
    "label": Command(
        _fields,
        lambda i, o, c: [
            "label",
            i["fields"],
            "--out",
            _get(o, "--out", c.p("labels.nc")),
            "--events",
            _get(o, "--events", c.p("labels.csv")),
            "--no-progress",
        ],
        ("--out", "--events"),
        globbed=("fields",),
    ),
    "predict": Command(
        _predict_inputs,
        lambda i, o, c: [
            "predict",
            "--model",
            i["model"],
            i["fields"],
            "--out",
            _get(o, "--out", c.p("pred.nc")),
            "--no-progress",
        ],
        ("--out",),
        globbed=("fields",),
        folders=("model",),
    ),
    "tracks": Command(
        _fields,
        lambda i, o, c: [
            "tracks",
            i["fields"],
            "--out",
            _get(o, "--out", c.p("t.nc")),
            "--csv",
            _get(o, "--csv", c.p("t.csv")),
        ],
        ("--out", "--csv"),
        globbed=("fields",),
    ),
    "stats": Command(
        _stats_inputs,
        lambda i, o, c: [
            "stats",
            i["mask"],
            "--fields",
            i["fields"],
            "--tracks",
            i["tracks"],
            "--out",
            _get(o, "--out", c.p("freq.nc")),
            "--events",
            _get(o, "--events", c.p("ev.csv")),
            "--landfall",
            _get(o, "--landfall", c.p("lf.csv")),
            "--precip",
            _get(o, "--precip", c.p("pr.csv")),
        ],
        ("--out", "--events", "--landfall", "--precip"),
        globbed=("mask", "fields"),
    ),
    "stats-compare": Command(
        _compare_inputs,
        lambda i, o, c: [
            "stats",
            "compare",
            i["a"],
            i["b"],
            "--fields",
            i["fa"],
            i["fb"],
            "--block",
            "8",
            "--out",
            _get(o, "--out", c.p("ch.nc")),
            "--csv",
            _get(o, "--csv", c.p("ch.csv")),
            "--events",
            _get(o, "--events", c.p("ev.csv")),
            "--precip",
            _get(o, "--precip", c.p("pr.csv")),
        ],
        ("--out", "--csv", "--events", "--precip"),
        globbed=("a", "fb"),
    ),
    "score": Command(
        _score_inputs,
        lambda i, o, c: [
            "score",
            i["mask"],
            "--expert",
            i["expert"],
            "--variable",
            "truth",
            "--csv",
            _get(o, "--csv", c.p("scores.csv")),
        ],
        ("--csv",),
        folders=("expert",),
    ),
    "synth": Command(
        lambda c, x: {},
        lambda i, o, c: [
            "synth",
            "--n-time",
            "2",
            "--out",
            _get(o, "--out", c.p("f.nc")),
            "--events",
            _get(o, "--events", c.p("f.csv")),
        ],
        ("--out", "--events"),
    ),
}


def _member(folder: str) -> Path:
    """A file inside the input folder ``folder`` (the first, in sorted order)."""
    return sorted(p for p in Path(folder).rglob("*") if p.is_file())[0]


def _situations():
    """(command, output option, input, how) for every output option of every command."""
    for name, cmd in COMMANDS.items():
        inputs = {
            "label": ["fields"],
            "predict": ["fields", "model"],
            "tracks": ["fields"],
            "stats": ["mask", "fields", "tracks"],
            "stats-compare": ["a", "fb"],  # a mask and a fields file of B: the other two alike
            "score": ["mask", "expert"],
            "synth": [],
        }[name]
        for option in cmd.outputs:
            for i, what in enumerate(inputs):
                how = "inside" if what in cmd.folders else "same"
                yield name, option, what, how
                if i == 0 and how == "same":  # the ways to name one file by another path
                    yield name, option, what, "symlink"
                    yield name, option, what, "hardlink"
            for what in cmd.globbed[:1]:
                yield name, option, what, "glob"
            if option != cmd.outputs[0]:  # two outputs on one path
                yield name, option, cmd.outputs[0], "output"


SITUATIONS = list(_situations())


@pytest.fixture(scope="module")
def golden(tmp_path_factory):
    return make_golden(tmp_path_factory.mktemp("golden"))


@pytest.fixture(scope="module")
def extra(golden, tmp_path_factory):
    """A real tracks file of the golden fields and a ClimateNet expert folder."""
    from climnb.cli import main
    from climnb.labels.expert import write_expert_folder

    d = tmp_path_factory.mktemp("extra")
    assert main(["tracks", str(golden.fields), "--out", str(d / "tracks.nc")]) == 0
    write_expert_folder(d / "expert", n_time=2, seed=3)
    return {"tracks": d / "tracks.nc", "expert": d / "expert"}


def _build(command: str, option: str, what: str, how: str, extra):
    cmd = COMMANDS[command]

    def build(c: Ctx) -> list[str]:
        inputs = cmd.inputs(c, extra)
        if how == "output":  # this output on the command's first output's default path
            first = cmd.argv(inputs, {}, c)
            return cmd.argv(inputs, {option: first[first.index(what) + 1]}, c)
        path = inputs[what]
        if how == "same":
            target = path
        elif how == "symlink":
            target = c.link("alias" + Path(path).suffix, path)
        elif how == "hardlink":
            target = c.p("hard" + Path(path).suffix)
            os.link(path, target)
        elif how == "glob":  # the input given as a pattern, the output one of its files
            target, inputs = path, {**inputs, what: path[:-1] + "?"}
        elif how == "inside":
            target = str(_member(path))
        else:
            raise AssertionError(how)
        return cmd.argv(inputs, {option: target}, c)

    return build


@pytest.mark.parametrize(
    "command,option,what,how", SITUATIONS, ids=["-".join(s) for s in SITUATIONS]
)
def test_no_output_overwrites_an_input(command, option, what, how, golden, extra, tmp_path):
    case = Case(
        f"{command}-{option}-{what}-{how}",
        _build(command, option, what, how, extra),
        (option,),
        SAME,
    )
    outcome = run_case(case, tmp_path, golden)
    problems = judge(case, outcome)
    assert not problems, (
        f"climnb {' '.join(outcome.argv)}\n  "
        + "\n  ".join(problems)
        + (f"\nstderr:\n{outcome.stderr}")
    )


def test_every_output_option_is_walked():
    """The file outputs of each command (from its parser) are all in the walk above."""
    from climnb.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command").choices
    outputs = {"--out", "--events", "--csv", "--landfall", "--precip"}
    for name in {n.split("-")[0] for n in COMMANDS}:
        options = {o for a in sub[name]._actions for o in a.option_strings} & outputs
        ours = [s for s in SITUATIONS if s[0].split("-")[0] == name]
        walked = {s[1] for s in ours} | {s[2] for s in ours if s[3] == "output"}
        assert options == walked, name


def test_a_hard_link_to_a_file_inside_an_input_folder_is_refused(tmp_path):
    from climnb.io.outputs import OutputError, check_outputs

    folder = tmp_path / "expert"
    folder.mkdir()
    (folder / "data-2000-01-01-00-1_0.nc").write_bytes(b"labels")
    os.link(folder / "data-2000-01-01-00-1_0.nc", tmp_path / "scores.csv")
    with pytest.raises(OutputError, match=r"--csv .*scores.csv is a hard link to .*1_0.nc"):
        check_outputs({"--csv": tmp_path / "scores.csv"}, [tmp_path / "mask.nc", folder])
    assert check_outputs({"--csv": tmp_path / "other.csv"}, [folder])["--csv"].name == "other.csv"
