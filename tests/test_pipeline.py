"""The tf.data input pipeline: order, sharding, normalisation, channels, weights, buffers."""

from __future__ import annotations

import subprocess
import sys

import h5py
import numpy as np
import pytest

from climnb.io.channels import CHANNEL_NAMES
from climnb.io.reader import BatchLoader, SampleReader
from climnb.io.samples import SampleError, read_sample, write_samples
from climnb.io.stats import compute_stats
from climnb.train.pipeline import PipelineConfig, epoch_order, shard_files

WEIGHTS = [0.5, 20.0, 4.0]


@pytest.fixture(scope="module")
def files(toy, tmp_path_factory):
    ds = toy[0]
    return write_samples(ds, ds.truth, tmp_path_factory.mktemp("pipe"))


@pytest.fixture(scope="module")
def stats(files):
    return compute_stats(files)


def expected(path, stats, channels=None):
    """What the pipeline should deliver for one file, computed the plain way."""
    data, labels = read_sample(path)
    idx = [CHANNEL_NAMES.index(c) for c in channels] if channels else list(range(16))
    lo, hi = stats.minval[idx], stats.maxval[idx]
    x = (data[..., idx].astype(np.float64) - lo) / (hi - lo)
    return x, labels.astype(np.int32), np.asarray(WEIGHTS, np.float32)[labels]


def test_import_does_not_start_tensorflow():
    code = (
        "import climnb.train.pipeline, climnb.data.staging, sys; print('tensorflow' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_epoch_order_is_seeded_per_epoch():
    a, b = epoch_order(20, seed=5, epoch=0), epoch_order(20, seed=5, epoch=1)
    assert sorted(a) == list(range(20)) and sorted(b) == list(range(20))
    assert not np.array_equal(a, b)
    np.testing.assert_array_equal(a, epoch_order(20, seed=5, epoch=0))
    np.testing.assert_array_equal(b, epoch_order(20, seed=4, epoch=2))  # seed + epoch


def test_shards_are_disjoint_and_cover(files):
    shards = [shard_files(files[::-1], r, 3) for r in range(3)]
    assert sorted(f for s in shards for f in s) == sorted(files)
    assert [len(s) for s in shards] == [3, 3, 2]
    with pytest.raises(ValueError):
        shard_files(files, 3, 3)


@pytest.mark.parametrize("channels", [None, ("PSL", "TMQ", "PRECT")], ids=["all", "subset"])
def test_reader_normalises_subsets_and_weights(files, stats, channels):
    reader = SampleReader(files, stats, channels=channels, class_weights=WEIGHTS, block_rows=7)
    x, y, w = reader.read([3, 0])
    for k, i in enumerate([3, 0]):
        ex, ey, ew = expected(files[i], stats, channels)
        np.testing.assert_allclose(x[k], ex, atol=2e-6)
        np.testing.assert_array_equal(y[k], ey)
        np.testing.assert_array_equal(w[k], ew)
    assert x.dtype == np.float32 and y.dtype == np.int32 and w.dtype == np.float32


def test_foreign_chunked_file_takes_the_h5py_path(files, stats, tmp_path):
    data, labels = read_sample(files[1])
    path = tmp_path / "data-2106-01-01-00-1.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("climate/data", data=data, chunks=(8, 8, 16), compression="gzip")
        f.create_dataset("climate/labels_0", data=labels.astype(np.float32))
    x, y, w = SampleReader([path], stats, class_weights=WEIGHTS).read([0])
    ex, ey, ew = expected(files[1], stats)
    np.testing.assert_allclose(x[0], ex, atol=2e-6)
    np.testing.assert_array_equal(y[0], ey)
    np.testing.assert_array_equal(w[0], ew)


def _with_soft(path, data, labels, soft, **storage):
    with h5py.File(path, "w") as f:
        f.create_dataset("climate/data", data=data, **storage)
        f.create_dataset("climate/labels_0", data=labels.astype(np.float32))
        f.create_dataset("climate/labels_soft", data=soft, **storage)


def test_a_chunked_soft_target_is_read_through_h5py(files, stats, tmp_path):
    """Soft targets stored chunked and compressed (no byte offset to read at) come back
    whole, as the one-hot of the class ids they were made from."""
    data, labels = read_sample(files[1])
    soft = np.eye(len(WEIGHTS), dtype=np.float32)[labels.astype(int)]
    path = tmp_path / "data-2106-01-01-00-1.h5"
    _with_soft(path, data, labels, soft, chunks=True, compression="gzip")
    _, y, _ = SampleReader([path], stats, class_weights=WEIGHTS, soft=True).read([0])
    np.testing.assert_array_equal(y[0], soft)


def test_a_soft_target_above_one_is_refused_naming_the_file(files, stats, tmp_path):
    data, labels = read_sample(files[1])
    soft = np.eye(len(WEIGHTS), dtype=np.float32)[labels.astype(int)] * 1.5  # 0 and 1.5
    path = tmp_path / "data-2106-01-01-00-1.h5"
    _with_soft(path, data, labels, soft)
    reader = SampleReader([path], stats, class_weights=WEIGHTS, soft=True)
    with pytest.raises(SampleError, match=r"data-2106.*labels_soft.*outside 0\.\.1"):
        reader.read([0])


def test_reader_sees_a_file_replaced_between_epochs(files, stats, tmp_path):
    """A reader remembers what it found in each file (training builds one every epoch) only
    while the file is unchanged: a file replaced by another (a rename over it) or rewritten
    in place is inspected again, and its new layout read."""
    path = tmp_path / files[0].name
    path.write_bytes(files[0].read_bytes())
    first = SampleReader([path], stats)
    assert SampleReader([path], stats).infos[0] == first.infos[0]  # remembered
    data, labels = read_sample(files[1])
    other = tmp_path / "other.h5"
    with h5py.File(other, "w") as f:  # the same sample, stored chunked: other offsets
        f.create_dataset("climate/data", data=data, chunks=(8, 8, 16), compression="gzip")
        f.create_dataset("climate/labels_0", data=labels.astype(np.float32))
    other.replace(path)
    again = SampleReader([path], stats, class_weights=WEIGHTS)
    assert again.infos[0].data_offset is None and first.infos[0].data_offset is not None
    np.testing.assert_allclose(again.read([0])[0][0], expected(files[1], stats)[0], atol=2e-6)
    with h5py.File(path, "r+") as f:  # rewritten in place: no labels any more
        del f["climate/labels_0"]
    with pytest.raises(SampleError, match="no dataset climate/labels_0"):
        SampleReader([path], stats)


def test_reader_errors(files, stats, tmp_path):
    with pytest.raises(SampleError, match="no sample files"):
        SampleReader([], stats)
    with pytest.raises(ValueError, match="unknown channel"):
        SampleReader(files, stats, channels=("NOPE",))
    with pytest.raises(SampleError, match="statistics have 2 channels"):
        SampleReader(files, stats.select([0, 1]))
    swapped = stats.select([1, 0, *range(2, len(stats.channels))])  # TMQ and U850 swapped
    with pytest.raises(SampleError, match="channels U850, TMQ, .* do not match the files'"):
        SampleReader(files, swapped)
    bad = tmp_path / files[0].name
    bad.write_bytes(files[0].read_bytes())
    reader = SampleReader([bad], stats)
    with open(bad, "r+b") as f:  # truncated after the pipeline was built
        f.truncate(reader.infos[0].data_offset + 1000)
    with pytest.raises(SampleError, match=f"{bad}: truncated"):
        reader.read([0])


@pytest.fixture(scope="module")
def tf():
    return pytest.importorskip("tensorflow")


@pytest.mark.parametrize("workers", [0, 2], ids=["in-thread", "processes"])
def test_dataset_epochs_order_and_values(files, stats, tf, workers):
    from climnb.train.pipeline import make_dataset

    cfg = PipelineConfig(batch_size=3, seed=7, workers=workers, prefetch=2)
    ds = make_dataset(files, stats, class_weights=WEIGHTS, epochs=2, config=cfg)
    batches = list(ds)  # all kept alive: reused buffers must not overwrite them
    assert [int(b[0].shape[0]) for b in batches] == [3, 3, 2, 3, 3, 2]
    order = [files[i] for e in (0, 1) for i in epoch_order(len(files), seed=7, epoch=e)]
    got = [(x[k], y[k], w[k]) for x, y, w in batches for k in range(x.shape[0])]
    assert len(got) == len(order)
    for (x, y, w), path in zip(got, order, strict=True):
        ex, ey, ew = expected(path, stats)
        np.testing.assert_allclose(x.numpy(), ex, atol=2e-6)
        np.testing.assert_array_equal(y.numpy(), ey)
        np.testing.assert_array_equal(w.numpy(), ew)
    x, y, w = batches[0]
    assert x.dtype == tf.float32 and y.dtype == tf.int32 and w.dtype == tf.float32
    assert ds.element_spec[0].shape.as_list() == [None, 96, 144, 16]


def test_dataset_shards_by_rank_and_drops_remainder(files, stats, tf):
    from climnb.train.pipeline import make_dataset

    seen = []
    for rank in range(2):
        cfg = PipelineConfig(batch_size=2, drop_remainder=True, channels=("TMQ",))
        ds = make_dataset(files, stats, rank=rank, size=2, config=cfg)
        for x, y, _ in ds:
            assert x.shape == (2, 96, 144, 1)
            seen += [int(v) for v in np.asarray(y).reshape(2, -1).sum(1)]
    # every file once: the label sums identify the files
    want = sorted(int(read_sample(f)[1].astype(int).sum()) for f in files)
    assert sorted(seen) == want


def test_autotuner_off_unless_asked(files, stats, tf):
    """The sizes are fixed, so tf.data's autotuner stays off (it stalled iterator teardown)."""
    from climnb.train.pipeline import make_dataset

    default = make_dataset(files, stats, config=PipelineConfig(batch_size=2))
    assert default.options().autotune.enabled is False
    tuned = make_dataset(files, stats, config=PipelineConfig(batch_size=2, autotune=True))
    assert tuned.options().autotune.enabled is True
    assert [x.shape[0] for x, *_ in tuned] == [x.shape[0] for x, *_ in default]


def test_buffers_are_reused_when_tensors_are_dropped(files, stats, tf, monkeypatch):
    import climnb.train.pipeline as pipeline

    made = []

    class Spy(BatchLoader):
        def __init__(self, *a, **k):
            super().__init__(*a, **k)
            made.append(self)

    monkeypatch.setattr(pipeline, "BatchLoader", Spy)
    cfg = PipelineConfig(batch_size=2, prefetch=1, read_ahead=2)
    n = sum(1 for _ in pipeline.make_dataset(files, stats, epochs=6, config=cfg))
    assert n == 24
    assert 1 <= made[0].slots_made <= 6  # 24 batches read into a handful of buffers
    assert not made[0]._procs  # the readers stopped after the last batch


def test_loader_reports_bad_file_from_worker(files, stats, tmp_path):
    bad = tmp_path / files[0].name
    bad.write_bytes(files[0].read_bytes())
    reader = SampleReader([bad, files[1]], stats)
    with open(bad, "r+b") as f:
        f.truncate(reader.infos[0].data_offset + 1000)
    loader = BatchLoader(reader, 2, workers=1)
    try:
        with pytest.raises(SampleError, match=f"{bad}: truncated"):
            loader.get("k", [1, 0])
        x, y, w = loader.get("ok", [1])  # the loader is still usable
        np.testing.assert_array_equal(y[0], read_sample(files[1])[1])
    finally:
        loader.close()


def test_dataset_error_names_file(files, stats, tmp_path, tf):
    from climnb.train.pipeline import make_dataset

    bad = tmp_path / files[0].name
    bad.write_bytes(files[0].read_bytes())
    ds = make_dataset([bad], stats, config=PipelineConfig(workers=1))
    with open(bad, "r+b") as f:
        f.truncate(100_000)
    with pytest.raises(tf.errors.OpError, match="truncated"):
        list(ds)


def test_roll_augmentation_rolls_data_and_labels_together(files, stats, tf):
    from climnb.train.pipeline import make_dataset, roll_shifts

    plain = PipelineConfig(batch_size=3, seed=4, workers=0)
    rolled = PipelineConfig(batch_size=3, seed=4, workers=2, augment="roll")
    kwargs = {"class_weights": WEIGHTS, "epochs": 2}
    a = list(make_dataset(files, stats, config=plain, **kwargs))
    b = list(make_dataset(files, stats, config=rolled, **kwargs))
    assert len(a) == len(b) == 6
    moved = 0
    for n, ((x, y, w), (rx, ry, rw)) in enumerate(zip(a, b, strict=True)):
        shifts = roll_shifts(int(x.shape[0]), 144, seed=4, epoch=n // 3, batch=n % 3)
        moved += int((shifts != 0).sum())
        for i, s in enumerate(shifts):
            np.testing.assert_array_equal(rx[i].numpy(), np.roll(x[i].numpy(), s, axis=1))
            np.testing.assert_array_equal(ry[i].numpy(), np.roll(y[i].numpy(), s, axis=1))
            np.testing.assert_array_equal(rw[i].numpy(), np.roll(w[i].numpy(), s, axis=1))
    assert moved > 10  # the shifts are not all zero
    # seeded: the same configuration rolls the same way; another seed another way
    again = next(iter(make_dataset(files, stats, config=rolled, **kwargs)))
    np.testing.assert_array_equal(again[1].numpy(), b[0][1].numpy())
    first = roll_shifts(3, 144, seed=4, epoch=0, batch=0)
    assert not np.array_equal(roll_shifts(3, 144, seed=5, epoch=0, batch=0), first)


def test_mirror_augmentation_is_the_other_hemisphere(files, stats, tf):
    """Mirrored samples are reversed north to south, labels and weights with them, and their
    meridional winds are negated in physical units; the others pass unchanged."""
    from climnb.train.pipeline import make_dataset, mirror_flags

    plain = PipelineConfig(batch_size=3, seed=4, workers=0)
    mirrored = PipelineConfig(batch_size=3, seed=4, workers=2, augment="mirror")
    kwargs = {"class_weights": WEIGHTS, "epochs": 2}
    a = list(make_dataset(files, stats, config=plain, **kwargs))
    b = list(make_dataset(files, stats, config=mirrored, **kwargs))
    lo, span = stats.minval, stats.maxval - stats.minval
    sign = np.array([-1.0 if c in ("V850", "VBOT") else 1.0 for c in CHANNEL_NAMES])
    counts = [0, 0]
    for n, ((x, y, w), (mx, my, mw)) in enumerate(zip(a, b, strict=True)):
        flips = mirror_flags(int(x.shape[0]), seed=4, epoch=n // 3, batch=n % 3)
        for i, flip in enumerate(flips):
            counts[int(flip)] += 1
            if not flip:
                np.testing.assert_array_equal(mx[i].numpy(), x[i].numpy())
                continue
            physical = x[i].numpy().astype(np.float64) * span + lo
            np.testing.assert_allclose(
                mx[i].numpy() * span + lo, sign * physical[::-1], rtol=1e-5, atol=1e-3
            )
            np.testing.assert_array_equal(my[i].numpy(), y[i].numpy()[::-1])
            np.testing.assert_array_equal(mw[i].numpy(), w[i].numpy()[::-1])
    assert min(counts) > 0, counts  # some samples mirrored, some not


def test_roll_augmentation_is_for_training_batches_only():
    with pytest.raises(ValueError, match="never augmented"):
        PipelineConfig(shuffle=False, augment="roll")
    with pytest.raises(ValueError, match="augment must be one of"):
        PipelineConfig(augment="flip")
