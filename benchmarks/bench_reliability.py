"""How many of the bad-input cases every ``climnb`` subcommand handles.

Runs the table of ``tests/bad_input_cases.py`` (the same one ``tests/test_bad_input.py``
runs) at toy size and prints, per case, whether it was handled: exit status 2, one error line
naming the file and the problem, and no file changed. Then the figures: cases tried, handled,
not set up here (the tmpfs cases need root), and the unhandled ones grouped by command, each
with what went wrong.

    .venv/bin/python benchmarks/bench_reliability.py [--only label-] [--keep DIR] [-v]

How the figures could be wrong: "handled" is judged by patterns (a file name and a key word in
the error line), so an error that names the right file but says something unhelpful that
happens to contain the key word counts as handled; a case the table does not contain is
neither tried nor counted. Cases that need root are counted apart, not as handled.
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import _quiet  # noqa: F401  (before the libraries: their start-up logs and warnings off)

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from bad_input_cases import CASES, Unavailable, judge, make_golden, run_case  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="*", default=(), help="case id prefixes to run")
    parser.add_argument("--keep", help="folder to build the cases in (kept; default: a temp)")
    parser.add_argument(
        "--xfail", action="store_true", help="also print the unhandled ids as a Python dict"
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="print each case's stderr")
    args = parser.parse_args(argv)
    # the commands' own logging.basicConfig is then a no-op: their INFO lines stay quiet
    logging.basicConfig(level=logging.WARNING, format="%(name)s %(levelname)s %(message)s")

    cases = [c for c in CASES if not args.only or c.id.startswith(tuple(args.only))]
    root = Path(args.keep or tempfile.mkdtemp(prefix="climnb-rel-"))
    root.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    golden = make_golden(root / "golden")
    print(f"golden inputs made in {time.perf_counter() - t0:.1f} s under {root}")
    handled, unhandled, unavailable = [], defaultdict(list), []
    start = time.perf_counter()
    for i, case in enumerate(cases):
        t = time.perf_counter()
        try:
            outcome = run_case(case, root / f"c{i:03d}", golden)
        except Unavailable as err:
            unavailable.append((case, str(err)))
            print(f"  n/a      {case.id:<42} {err}")
            continue
        problems = judge(case, outcome)
        verdict = "handled" if not problems else "UNHANDLED"
        print(f"  {verdict:<9}{case.id:<42} {time.perf_counter() - t:5.1f} s", flush=True)
        if args.verbose:
            print(
                "      "
                + (outcome.stderr.strip() or outcome.raised)[:400].replace("\n", "\n      ")
            )
        (unhandled[case.command].append((case, problems)) if problems else handled.append(case))
    seconds = time.perf_counter() - start
    tried = len(cases) - len(unavailable)
    n_unhandled = sum(map(len, unhandled.values()))
    print(
        f"\ncases tried {tried}, handled {len(handled)} "
        f"({100 * len(handled) / max(tried, 1):.0f} %),"
        f" unhandled {n_unhandled}, not set up here {len(unavailable)}; {seconds:.0f} s"
        f" ({seconds / max(tried, 1):.2f} s per case)"
    )
    by_command = defaultdict(lambda: [0, 0])
    for case in cases:
        if all(case is not u for u, _ in unavailable):
            by_command[case.command][0] += 1
            by_command[case.command][1] += case in handled
    print("per command: " + ", ".join(f"{k} {h}/{n}" for k, (n, h) in sorted(by_command.items())))
    for command, items in sorted(unhandled.items()):
        print(f"\nunhandled, {command} ({len(items)}):")
        for case, problems in items:
            print(f"  {case.id}: {problems[0][:160]}")
    if args.xfail:
        print("\nUNHANDLED = {")
        for _command, items in sorted(unhandled.items()):
            for case, problems in items:
                print(f"    {case.id!r}: {problems[0][:70]!r},")
        print("}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
