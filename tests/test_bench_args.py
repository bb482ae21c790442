"""The benchmarks refuse a setting too small to measure while parsing their arguments, in one
line that names it and the smallest value that works; and what a short run cannot measure is
said in words, never printed as nan (benchmarks/_args.py and each script's parsing)."""

from __future__ import annotations

import os

import pytest
from _benchmarks import load_benchmark

_LOADED: dict = {}


def _bench(name: str):
    """Each script loaded once for the module (some import TensorFlow's side of climnb)."""
    if name not in _LOADED:
        _LOADED[name] = load_benchmark(name)
    return _LOADED[name]


def _refusal(name: str, argv: list[str], capsys) -> str:
    """The error line of ``argv``'s parse: argparse's exit status 2, and no traceback."""
    module = _bench(name)
    parse = getattr(module, "parse_args", None) or module.main
    with pytest.raises(SystemExit) as exit_info:
        parse(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err.strip().splitlines()[-1]


REFUSALS = [
    ("bench_pipeline", ["--n-files", "3", "--batch-size", "2"], "--n-files", "at least 2 x"),
    ("bench_pipeline", ["--rounds", "0"], "--rounds", "at least 1, got 0"),
    ("bench_stats", ["--years", "0"], "--years", "at least 1, got 0"),
    ("bench_stats", ["--chunk", "0"], "--chunk", "at least 1, got 0"),
    ("bench_stats", ["--years", "1", "--chunk", "3000"], "--chunk", "at most 2920 "),
    ("bench_stats", ["--resamples", "9"], "--resamples", "at least 19, got 9"),
    ("bench_stats", ["--pair-steps", "16"], "--pair-steps", "at least --block + 1 (17"),
    ("bench_stats", ["--shape", "10x10"], "--shape", "need at least 16 x 24"),
    ("bench_stats", ["--shape", "96by144"], "--shape", "LATxLON"),
    ("bench_resume", ["--n-time", "1"], "--n-time", "at least 20 "),
    ("bench_resume", ["--kill-at", "0"], "--kill-at", "(0, 1]"),
    ("bench_finetune", ["--samples", "1"], "--samples", "at least 20 "),
    ("bench_finetune", ["--tune-steps", "2"], "--tune-steps", "at least 3 "),
    ("bench_finetune", ["--epochs", "0"], "--epochs", "at least 1, got 0"),
    ("bench_finetune", ["--heldout", "0"], "--heldout", "at least 1, got 0"),
    ("bench_labels", ["--steps", "0"], "--steps", "at least 1, got 0"),
    ("bench_labels", ["--memory-steps", "1"], "--memory-steps", "at least 4, got 1"),
    ("bench_labels", ["--scaling-repeat", "0"], "--scaling-repeat", "at least 1, got 0"),
    ("bench_labels", ["--ipart-steps", "1"], "--ipart-steps", "at least 2, got 1"),
    ("bench_labels", ["--arrangements", "thread"], "--arrangements", "arrangements are"),
    ("bench_training", ["--scaling-steps", "2"], "--scaling-steps", "at least 6, got 2"),
    ("bench_training", ["--scaling-runs", "0"], "--scaling-runs", "at least 1, got 0"),
    ("bench_training", ["--turnover-epochs", "1"], "--turnover-epochs", "at least 2, got 1"),
    ("bench_models", ["--steps", "0"], "--steps", "at least 1, got 0"),
    ("bench_engines_slurm", ["--engines", "0"], "--engines", "at least 1, got 0"),
    ("bench_engines_slurm", ["--repeat", "0"], "--repeat", "at least 1, got 0"),
    (
        "bench_throughput",
        ["--only", "predict", "--days", "1", "--predict-steps", "9"],
        "--predict-steps",
        "at most 8 ",
    ),
    (
        "bench_throughput",
        ["--breakdown-steps", "8", "--days", "1"],
        "--breakdown-steps",
        "at most 7",
    ),
    ("bench_throughput", ["--predict-workers", "1,0"], "--predict-workers", "at least 1, got 0"),
    ("bench_throughput", ["--only", "predict,speed"], "--only", "values are write,"),
]


@pytest.mark.parametrize(
    "name, argv, option, says",
    REFUSALS,
    ids=[f"{name}{' '.join(['', *argv])}" for name, argv, *_ in REFUSALS],
)
def test_a_setting_too_small_is_refused_in_one_line(name, argv, option, says, capsys):
    line = _refusal(name, argv, capsys)
    assert f"error: argument {option}: " in line, line
    assert says in line, line


def test_more_engines_than_cpus_are_refused(capsys):
    line = _refusal("bench_engines_slurm", ["--engines", str((os.cpu_count() or 1) + 1)], capsys)
    assert f"--engines: must be at most {os.cpu_count() or 1}" in line


def test_the_smallest_settings_named_are_accepted():
    """The values the refusals name parse: they are the smallest that work, not a guess."""
    assert _bench("bench_resume").parse_args(["--n-time", "20"]).n_time == 20
    args = _bench("bench_finetune").parse_args(["--samples", "20", "--tune-steps", "3"])
    assert (args.samples, args.tune_steps) == (20, 3)
    args = _bench("bench_pipeline").parse_args(["--n-files", "4", "--batch-size", "2"])
    assert args.n_files == 4
    args = _bench("bench_stats").parse_args(["--pair-steps", "17", "--resamples", "19"])
    assert (args.pair_steps, args.resamples) == (17, 19)
    args = _bench("bench_throughput").parse_args(
        ["--only", "predict,breakdown", "--days", "1", "--predict-steps", "8"]
        + ["--breakdown-steps", "7"]
    )
    assert args.only == ("predict", "breakdown") and args.predict_workers == (1, 2)


def test_fewest_split_steps_is_what_the_split_takes():
    """bench_resume and bench_finetune ask climnb's own split for their smallest series."""
    import pandas as pd

    from climnb.io.split import split_steps

    def sizes(n, **split) -> list[int]:
        times = pd.date_range("2000-01-01", periods=n, freq="3h").values
        try:
            return [p.size for p in split_steps(times, **split)]
        except ValueError:  # the block split's 24 h gaps leave no room
            return [0, 0, 0]

    fewest = _bench("_args").fewest_split_steps
    least = fewest(train=2)
    assert all(sizes(n)[0] < 2 or not all(sizes(n)) for n in range(1, least))
    train, val, test = sizes(least)
    assert train >= 2 and val and test
    tune = {"method": "random", "fractions": (0.75, 0.25, 0.0)}
    assert fewest(train=2, test=0, **tune) == 3
    assert sizes(3, **tune) == [2, 1, 0] and sizes(2, **tune)[1] == 0


# --- what a short run cannot measure: said, not nan ----------------------------------------


def test_weak_scaling_without_timed_steps_says_so():
    import pandas as pd

    weak_scaling = _bench("bench_training").weak_scaling
    rates = pd.DataFrame({"samples_per_s": [2.0, 2.0], "time": [1.0, 2.0]})
    empty = rates.iloc[:0]
    assert "more --scaling-steps" in weak_scaling(empty, [rates, rates], rates)
    assert "did not overlap" in weak_scaling(rates, [rates, empty], rates)
    r_alone, r_pair, r_two, eff, sharing, exchange = weak_scaling(
        rates, [rates, rates.assign(samples_per_s=1.0)], rates.assign(samples_per_s=3.0)
    )
    assert (r_alone, r_pair, r_two) == (2.0, 3.0, 3.0)
    assert (eff, sharing, exchange) == (0.75, 0.75, 1.0)


def _predict_run(n_calls: int) -> dict:
    """One ``climnb predict`` timeline as the benchmark's child reports it: the network's
    calls each 1 s, one a second from t = 2 s, in a batch begun 0.5 s before each."""
    calls = [(1, 2.0 + k, 3.0 + k) for k in range(n_calls)]
    return {
        "born": 0.0,
        "end": 3.0 + n_calls,
        "calls": calls,
        "tasks": [("predict-0", 1.0, 3.0 + n_calls), ("store-0", 3.0 + n_calls, 3.0 + n_calls)],
        "peak": 1e9,
        "batches": [(1, a - 0.5, b) for _, a, b in calls],
        "waits": [],
    }


def test_a_predict_run_too_short_for_a_phase_prints_no_nan(capsys):
    bench = _bench("bench_throughput")
    short = bench.phases(_predict_run(1), workers=2)
    assert short["network"] is None and short["per_step"] is None
    assert short["around"] is None  # the only batch began before the first call ended
    bench.print_runs({(2, 1): short}, 2, 1, 1, "float32")
    out = capsys.readouterr().out
    assert "nan" not in out
    assert "no call after the first 2 (more --predict-steps)" in out
    assert "no steady steps" in out and "growth with the steps not measured" in out

    long = bench.phases(_predict_run(4), workers=1)
    assert long["network"] == pytest.approx(1.0) and long["steady_steps"] == 3
    assert long["per_step"] == pytest.approx(1.0) and long["idle_steady"] == pytest.approx(0.0)
    bench.print_runs({(1, 4): long, (1, 2): long}, 1, 2, 4, "float32")
    out = capsys.readouterr().out
    assert "nan" not in out and "a step's network 1.00 s" in out and "4 steps / 2: 1.00" in out


# --- the CPU's theoretical peak ----------------------------------------------------------

ZEN4 = {
    "Vendor ID": "AuthenticAMD",
    "Model name": "AMD EPYC",
    "CPU family": "25",
    "Model": "17",
    "Core(s) per socket": "2",
    "Socket(s)": "1",
    "BogoMIPS": "5192.30",
    "Flags": "fma avx2 avx512f avx512_bf16 avx512_vnni",
}


def test_zen4_avx512_runs_on_256_bit_units():
    bench = _bench("bench_models")
    peak = bench.theoretical_peak(ZEN4)
    assert peak["fp32_per_cycle"] == 32 and "Zen 4" in peak["fp32_unit"]
    assert peak["fp32"] == pytest.approx(2 * 2.59615 * 32e9)
    assert peak["bf16"] == pytest.approx(2 * 2.59615 * 64e9)
    assert "nominal TSC clock" in peak["clock"]


@pytest.mark.parametrize(
    "info",
    [
        {"Vendor ID": "GenuineIntel", "Flags": "fma avx2 avx512f", "BogoMIPS": "4000"},
        {"Vendor ID": "GenuineIntel", "Flags": "fma avx2 avx512f avx512_bf16", "BogoMIPS": "1"},
        {"Vendor ID": "AuthenticAMD", "CPU family": "26", "Flags": "fma avx2 avx512f"},
        {"Vendor ID": "GenuineIntel", "Flags": "fma avx2"},  # no clock at all
    ],
    ids=["avx512-no-amx", "cooper-lake-like", "zen5", "no-clock"],
)
def test_a_peak_lscpu_cannot_give_is_not_printed(info, capsys):
    bench = _bench("bench_models")
    peak = bench.theoretical_peak(info)
    assert peak["fp32"] is None
    lines = " ".join(bench.describe_peak(peak))
    assert "theoretical FP32: not known" in lines and "nan" not in lines
    assert bench.share_of(100e9, peak["fp32"], "theoretical") == ""
    if "avx512_bf16" in info["Flags"]:
        assert peak["bf16"] is None and "theoretical BF16: not known" in lines


def test_zen1_avx2_has_128_bit_units():
    info = {"Vendor ID": "AuthenticAMD", "CPU family": "23", "Model": "1", "Flags": "fma avx2"}
    peak = _bench("bench_models").theoretical_peak(info | {"CPU max MHz": "3000"})
    assert peak["fp32_per_cycle"] == 16 and peak["fp32"] == pytest.approx(3.0 * 16e9)
    zen2 = info | {"Model": "49", "CPU max MHz": "3000"}
    assert _bench("bench_models").theoretical_peak(zen2)["fp32_per_cycle"] == 32
