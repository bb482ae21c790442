"""How fast the synthetic generator and `import climnb` are.

Prints seconds per generated time step at toy (96 x 144) and full (768 x 1152) size, next to a
baseline measured in the same run: drawing the same number of float32 Gaussian values with
NumPy (the least any generator of 16 noisy channels must spend). Target: a full-size sample in
about a second or less. Also prints `import climnb` time against a bare interpreter start.

    .venv/bin/python benchmarks/bench_synthetic.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time

import _quiet  # noqa: F401  (before the libraries: their start-up logs and warnings off)
import numpy as np

from climnb.data.synthetic import FULL_SHAPE, TOY_SHAPE, make_dataset


def best_of(repeat, fn):
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def bench_generation(shape, n_time, repeat):
    gen = best_of(repeat, lambda: make_dataset(n_time=n_time, n_lat=shape[0], n_lon=shape[1]))
    rng = np.random.default_rng(0)
    base = best_of(repeat, lambda: rng.standard_normal((n_time, 16, *shape), np.float32))
    per_step, base_step = gen / n_time, base / n_time
    print(
        f"{shape[0]:>4} x {shape[1]:<5} generate {per_step:8.4f} s/step | "
        f"numpy noise baseline {base_step:8.4f} s/step | ratio {per_step / base_step:6.1f}x"
    )
    return per_step


def bench_import(repeat):
    def run(code):
        return best_of(repeat, lambda: subprocess.run([sys.executable, "-c", code], check=True))

    bare, climnb = run("pass"), run("import climnb")
    print(
        f"import climnb {climnb - bare:.3f} s above a bare interpreter ({bare:.3f} s); "
        f"ratio of process times {climnb / bare:.2f}x"
    )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    bench_generation(TOY_SHAPE, 50, args.repeat)
    full = bench_generation(FULL_SHAPE, 4, args.repeat)
    print(f"full-size sample: {full:.2f} s (target <= 1 s): {'OK' if full <= 1.0 else 'SLOW'}")
    bench_import(args.repeat)


if __name__ == "__main__":
    main()
