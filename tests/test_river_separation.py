"""Rivers that touch come out as separate objects (climnb.labels.components.split_at_saddles,
climnb.labels.ar.river_rules), checked on the synthetic generator's rivers placed side by side
and end to end (make_dataset(river_layout=...), whose river_id says which river each truth
pixel belongs to) and on bands built for it; one river is not cut."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import xarray as xr

from climnb.data.synthetic import RIVER_LAYOUTS, make_dataset, save_dataset
from climnb.labels import ARConfig, LabelConfig, compute, label_dataset
from climnb.labels.ar import river_rules, transport_rivers
from climnb.labels.components import label_components, split_at_saddles

_TRANSPORT = ARConfig(method="transport")
LAT, LON = np.linspace(-90, 90, 96), np.arange(144) * 2.5


def _band(middle: float, *, start: int = 20) -> dict[str, np.ndarray]:
    """IVT of one band 40 columns (about 7,800 km) long at 45 degrees north, 800 at both ends
    and ``middle`` half way, 0.6 of that on the rows either side; poleward everywhere."""
    along = np.linspace(0.0, 1.0, 40)
    axis = middle + (800.0 - middle) * np.cos(np.pi * along) ** 2
    ivt = np.full((LAT.size, LON.size), 100.0)
    row = int(np.argmin(np.abs(LAT - 45.0)))
    cols = (start + np.arange(40)) % LON.size
    ivt[row, cols] = axis
    ivt[row - 1, cols] = ivt[row + 1, cols] = 0.6 * axis
    heading = np.radians(30.0)
    return {"IVT": ivt, "IVTU": ivt * np.cos(heading), "IVTV": ivt * np.sin(heading)}


def _rivers(fields, config=_TRANSPORT) -> tuple[np.ndarray, int]:
    mask, _ = transport_rivers(fields, LAT, LON, config)
    return label_components(mask)  # as tracks and event tables label the mask again


@pytest.mark.parametrize("start", [20, 124], ids=["inside", "across-the-seam"])
def test_two_rivers_end_to_end_part_at_their_saddle_one_river_stays_whole(start):
    """A band whose transport falls to 350 half way is two rivers (prominence / height
    0.82 >= 0.6); one that falls to 650 is one river (0.27) and stays whole, though a lax
    ratio would cut it."""
    fields = _band(350.0, start=start)
    labels, n = _rivers(fields)
    assert n == 2
    row = int(np.argmin(np.abs(LAT - 45.0)))
    ends = labels[row, [start % 144, (start + 39) % 144]]
    assert ends.min() > 0 and ends[0] != ends[1]
    above = int((fields["IVT"] >= 250).sum())
    assert above - 3 <= (labels > 0).sum() < above  # the cut between them is one pixel wide
    whole, n = _rivers(_band(650.0, start=start))
    assert n == 1 and (whole > 0).sum() == 3 * 40  # 0.6 x 650 >= 250: three rows all along
    _, n = _rivers(_band(650.0, start=start), replace(_TRANSPORT, split_ratio=0.2))
    assert n == 2, "a lax ratio cuts the river: the check above could fail"
    _, n = _rivers(_band(350.0, start=start), replace(_TRANSPORT, split_ratio=None))
    assert n == 1


def test_a_band_round_the_globe_of_four_rivers_comes_apart_into_four():
    """Four rivers of the southern storm track joined end to end all round the globe (as a
    reanalysis can show them): four objects, each a quarter of the band."""
    phase = np.arange(LON.size) * 2 * np.pi / LON.size * 4 + 0.3  # four crests, none at 0
    axis = 575.0 + 225.0 * np.cos(phase)  # 800 on the crests, 350 in the saddles
    ivt = np.full((LAT.size, LON.size), 100.0)
    row = int(np.argmin(np.abs(LAT + 45.0)))
    ivt[row - 1 : row + 2] = axis * np.array([[0.6], [1.0], [0.6]])
    heading = np.radians(30.0)
    fields = {"IVT": ivt, "IVTU": ivt * np.cos(heading), "IVTV": -ivt * np.sin(heading)}
    ring, n = label_components(ivt >= 250)
    assert n == 1 and (ring[row] > 0).all()  # one object round the globe ...
    _, n = _rivers(fields, replace(_TRANSPORT, split_ratio=None))
    assert n == 0  # ... whose centroid is at the pole: whole, it is no river at all
    labels, n = _rivers(fields)
    assert n == 4
    sizes = np.bincount(labels[labels > 0])[1:]
    assert sizes.min() >= 0.8 * sizes.max()
    crests = np.flatnonzero(np.diff(np.sign(np.diff(np.r_[axis[-1], axis, axis[0]]))) < 0)
    assert len({int(labels[row, c]) for c in crests}) == 4


def test_split_at_saddles_cuts_so_that_the_parts_stay_apart():
    ivt = _band(300.0, start=130)["IVT"]
    labels, n = split_at_saddles(ivt >= 250, ivt, LAT, LON, min_ratio=0.6)
    assert n == 2
    again, m = label_components(labels > 0, connectivity=8)
    assert m == 2
    np.testing.assert_array_equal(again > 0, labels > 0)
    _, n = split_at_saddles(ivt >= 250, ivt, LAT, LON, min_ratio=0.6, periodic=False)
    assert n == 3  # without the wrap, the seam cuts the first river in two
    with pytest.raises(ValueError, match="connectivity"):
        split_at_saddles(ivt >= 250, ivt, LAT, LON, min_ratio=0.6, connectivity=6)


def _scene(layout: str, n_ar: int, seed: int):
    ds, _ = make_dataset(n_time=1, n_tc=0, n_ar=n_ar, seed=seed, ivt=True, river_layout=layout)
    fields = {n: ds[n].values[0] for n in ("IVT", "IVTU", "IVTV")}
    return ds, fields, ds.river_id.values[0]


@pytest.mark.parametrize("n_ar", [2, 3])
@pytest.mark.parametrize("layout", RIVER_LAYOUTS)
def test_rivers_that_touch_come_apart_one_object_each(layout, n_ar):
    """Each generated river that the rules keep when alone is matched by exactly one
    labelled object, which holds most of its pixels and little else."""
    matched = 0
    for seed in range(6):
        ds, fields, ids = _scene(layout, n_ar, seed)
        lat, lon = ds.lat.values, ds.lon.values
        group, _ = label_components(ids >= 0)
        assert np.unique(group[ids >= 0]).size == 1, f"seed {seed}: the rivers do not touch"
        labels, n = label_components(transport_rivers(fields, lat, lon, _TRANSPORT)[0])
        objects = []
        for k in range(n_ar):
            river = ids == k
            if not river_rules(river, fields, lat, lon, _TRANSPORT)[0].any():
                assert not (labels[river] > 0).mean() > 0.5  # dropped alone, dropped here
                continue
            hits = np.bincount(labels[river], minlength=n + 1)[1:]
            best = int(hits.argmax()) + 1
            assert hits[best - 1] >= 0.85 * river.sum(), f"seed {seed}, river {k}"
            assert hits[best - 1] >= 0.85 * (labels == best).sum(), f"seed {seed}, river {k}"
            objects.append(best)
        assert len(set(objects)) == len(objects), f"seed {seed}: rivers share an object"
        matched += len(objects)
    assert matched >= 5 * n_ar  # rivers the rules drop alone are rare


def test_the_class_mask_keeps_touching_rivers_apart():
    """Through label_dataset: the class mask's river objects are the separated rivers."""
    ds, _, ids = _scene("side_by_side", 3, 0)
    labels, events = compute(*label_dataset(ds, LabelConfig()))
    rivers, n = label_components(labels.values[0] == 2)
    assert n == 3 == (events.class_id == 2).sum()
    assert len({int(np.bincount(rivers[ids == k]).argmax()) for k in range(3)}) == 3


def test_one_river_alone_is_not_cut():
    found = 0
    for seed in range(12):
        ds, _ = make_dataset(n_time=1, n_tc=0, n_ar=1, seed=seed, ivt=True)
        fields = {n: ds[n].values[0] for n in ("IVT", "IVTU", "IVTV")}
        labels, _ = _rivers(fields)
        pieces = set(np.unique(labels[ds.truth.values[0] == 2]).tolist()) - {0}
        assert len(pieces) <= 1, f"seed {seed}: one river in {len(pieces)} objects"
        found += len(pieces)
    assert found >= 10


def test_layouts_are_seeded_and_checked(tmp_path):
    a, events = make_dataset(n_time=2, n_tc=1, n_ar=2, seed=3, river_layout="end_to_end")
    save_dataset(a, events, tmp_path / "touching.nc")
    with xr.open_dataset(tmp_path / "touching.nc") as back:  # ids stay integers
        np.testing.assert_array_equal(back.river_id.values, a.river_id.values)
    b, _ = make_dataset(n_time=2, n_tc=1, n_ar=2, seed=3, river_layout="end_to_end")
    np.testing.assert_array_equal(a.river_id.values, b.river_id.values)
    np.testing.assert_array_equal(a.TMQ.values, b.TMQ.values)
    assert ((a.river_id.values >= 0) == (a.truth.values == 2)).all()
    river_events = set(events[events.class_id == 2].event_id)
    assert set(np.unique(a.river_id.values[a.river_id.values >= 0])) <= river_events
    assert "river_id" not in make_dataset(n_time=1, seed=3)[0]
    with pytest.raises(ValueError, match="river_layout must be one of .* with 2 or 3 rivers"):
        make_dataset(n_time=1, n_ar=4, river_layout="side_by_side")
    with pytest.raises(ValueError, match="river_layout must be one of"):
        make_dataset(n_time=1, n_ar=2, river_layout="diagonal")
