"""Cost of a frame of the segmentation explorer at full size (768 x 1152), against a naive view.

Measured in the same run: the first render of the layout (elements to bokeh models), and a
slider move (``plot.update(key)``: the DynamicMap callbacks run and the plots' data sources are
refilled, which is what goes to the browser), for

* the explorer (:func:`climnb.viz.explorer.segmentation_explorer`): rasters cut to the view and
  decimated to at most ``ExplorerConfig.max_shape`` (360 x 540) before they leave Python;
* a naive baseline with the same five panels drawn at full resolution (``max_shape`` set to
  the full grid, the panels too), which is what plain ``hv.Image`` overlays would send;
* the explorer without coastlines (``ExplorerConfig(coastlines=False)``), to show what drawing
  the shorelines on the four maps costs.

Prints seconds per slider move (median), the bytes of array data per frame, and the ratios.

    .venv/bin/python benchmarks/bench_explorer.py [--steps 3] [--repeat 3]
"""

from __future__ import annotations

import argparse
import statistics
import time

import holoviews as hv
import numpy as np

from climnb.synthetic import FULL_SHAPE, make_dataset
from climnb.viz.explorer import ExplorerConfig, segmentation_explorer


def _bytes_sent(plot) -> int:
    """Bytes of array data in the plot's data sources (what a slider move sends)."""
    from bokeh.models import ColumnDataSource

    total = 0
    for source in plot.state.select({"type": ColumnDataSource}):
        for values in source.data.values():
            for v in values if isinstance(values, list) else [values]:
                total += getattr(v, "nbytes", 0)
    return total


def update_cost(layout: hv.Layout, keys, repeat: int) -> tuple[float, float, int]:
    """First render (s), then median seconds per slider move and bytes sent per frame."""
    start = time.perf_counter()
    plot = hv.renderer("bokeh").get_plot(layout)
    first = time.perf_counter() - start
    times = []
    for _ in range(repeat):
        for key in keys[1:] + keys[:1]:
            start = time.perf_counter()
            plot.update(key)
            times.append(time.perf_counter() - start)
    return first, statistics.median(times), _bytes_sent(plot)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    ds, _ = make_dataset(n_time=args.steps, n_lat=FULL_SHAPE[0], n_lon=FULL_SHAPE[1], seed=0)
    pred = ds.truth.copy()
    pred[:, 300:340, 100:200] = 1  # some disagreement to draw
    keys = [("TMQ", np.datetime64(t, "ns")) for t in ds.time.values]

    fast = segmentation_explorer(ds, ds.truth, pred)
    full = FULL_SHAPE
    # the panels decimate to twice their pixel size: at half the grid they get it all
    naive_cfg = ExplorerConfig(max_shape=full, panel_width=full[1] // 2, panel_height=full[0] // 2)
    naive = segmentation_explorer(ds, ds.truth, pred, config=naive_cfg)
    update_cost(segmentation_explorer(ds.isel(time=[0]), ds.truth[:1], pred[:1]), keys[:1], 1)
    f_fast, t_fast, b_fast = update_cost(fast, keys, args.repeat)
    f_naive, t_naive, b_naive = update_cost(naive, keys, args.repeat)
    bare = segmentation_explorer(ds, ds.truth, pred, config=ExplorerConfig(coastlines=False))
    f_bare, t_bare, b_bare = update_cost(bare, keys, args.repeat)
    print(
        f"full-size explorer ({full[0]} x {full[1]}, 5 panels); slider moves: median of "
        f"{args.repeat * len(keys)}"
    )
    print(
        f"  explorer (decimated to <= 360 x 540): first render {f_fast:5.2f} s, "
        f"per move {t_fast:5.3f} s, {b_fast / 1e6:5.2f} MB of arrays per frame"
    )
    print(
        f"  naive full-resolution baseline:       first render {f_naive:5.2f} s, "
        f"per move {t_naive:5.3f} s, {b_naive / 1e6:5.2f} MB of arrays per frame"
    )
    print(
        f"  explorer without coastlines:          first render {f_bare:5.2f} s, "
        f"per move {t_bare:5.3f} s, {b_bare / 1e6:5.2f} MB of arrays per frame"
    )
    print(f"  coastlines cost: per move {t_fast / t_bare:.2f}x, bytes {b_fast / b_bare:.2f}x")
    print(
        f"  ratio naive / explorer: per move {t_naive / t_fast:.1f}x, "
        f"bytes {b_naive / b_fast:.1f}x, first render {f_naive / f_fast:.1f}x"
    )


if __name__ == "__main__":
    main()
