"""``ds.climnb``: the workflow as an xarray accessor, on the caller's grid.

Importing this module registers the accessor (``import climnb`` stays light and does not)::

    import climnb.accessor  # noqa: F401

* ``ds.climnb.label(config)``: heuristic labels (lazy, :func:`climnb.labels.label_dataset`);
* ``ds.climnb.predict(bundle)``: a trained network's segmentation (lazy,
  :func:`climnb.inference.predict.predict`; ``river_rules=True`` puts its rivers through the river
  definition's object rules);
* ``ds.climnb.tracks(mask)``: events of a class mask linked over time
  (:func:`climnb.tracks.track_events`), as a CF trajectory Dataset;
* ``ds.climnb.verify(mask, best_track)``: the cyclone tracks of a class mask verified
  against best tracks (:func:`climnb.stats.verify.verify_tracks`: POD, FAR, per storm);
* ``ds.climnb.explore(prediction)``: the segmentation explorer (HoloViews);
* ``ds.climnb.frequency(mask, by)``: how often each point lies in each class
  (:func:`climnb.stats.frequency`).

Results are xarray objects with CF attributes on the grid of ``ds``: its coordinate names,
latitude order and longitude convention, whatever climnb computes on internally.

Examples
--------
>>> import climnb.accessor
>>> from climnb.data.synthetic import make_dataset
>>> ds, _ = make_dataset(n_time=2, seed=0)
>>> west = ds.assign_coords(lon=(ds.lon + 180) % 360 - 180).sortby("lon")  # -180..180
>>> labels = west.climnb.label()
>>> labels.dims, float(labels.lon.min()) < 0, labels.attrs["flag_meanings"].split()[2]
(('time', 'lat', 'lon'), True, 'atmospheric_river')
"""

from __future__ import annotations

import os

import pandas as pd
import xarray as xr

from climnb.io.besttrack import read_best_tracks
from climnb.io.files import input_grid
from climnb.io.netcdf import normalize
from climnb.labels import label_dataset
from climnb.stats import class_mask, frequency
from climnb.stats.verify import verify_tracks
from climnb.tracks import TrackConfig, default_max_gap, track_events, tracks_to_dataset

__all__ = ["ClimnbAccessor"]

PathLike = str | os.PathLike


@xr.register_dataset_accessor("climnb")
class ClimnbAccessor:
    """Label, predict, track and explore a Dataset of climate fields (see the module doc)."""

    def __init__(self, ds: xr.Dataset):
        self._ds = ds

    def label(self, config=None, **kwargs) -> xr.DataArray:
        """Heuristic labels (0 background, 1 TC, 2 AR), lazy, uint8, on this Dataset's grid.

        ``config`` is a :class:`climnb.labels.LabelConfig` (default settings if ``None``);
        keyword arguments (``classes``, ``variables``, ``units``, ``regrid``) go to
        :func:`climnb.labels.label_dataset`.
        """
        labels, _ = label_dataset(self._ds, config, **kwargs)
        return labels

    def predict(
        self,
        bundle,
        *,
        batch_size: int = 4,
        probabilities: bool = False,
        river_rules=False,
        memory: float | None = None,
    ) -> xr.DataArray | xr.Dataset:
        """A trained network's segmentation (lazy) on this Dataset's grid.

        ``bundle`` is a :class:`climnb.bundle.Bundle` or its directory (``RUN/model``);
        ``river_rules=True`` (or an :class:`climnb.labels.ARConfig`) keeps only the predicted
        rivers the river definition's object rules accept, judged on this Dataset's fields
        (:func:`climnb.inference.postprocess.apply_river_rules`); ``memory`` (GB a batch) bounds
        the forward pass's peak, running fewer steps at a time or longitude tiles with the
        network's receptive field; see :func:`climnb.inference.predict.predict`.
        """
        from climnb.inference.predict import predict

        return predict(
            bundle,
            self._ds,
            batch_size=batch_size,
            probabilities=probabilities,
            river_rules=river_rules,
            memory=memory,
        )

    def tracks(self, mask: xr.DataArray | str, **kwargs) -> xr.Dataset:
        """Events of ``mask`` (a class mask on this grid, or the name of one in the Dataset)
        linked over time into tracks: a CF trajectory Dataset (see
        :func:`climnb.tracks.track_events`; keyword arguments go there)."""
        mask = self._ds[mask] if isinstance(mask, str) else mask
        return tracks_to_dataset(track_events(self._canonical(mask), **kwargs))

    def verify(self, mask: xr.DataArray | str, best_track, *, storms=None, **kwargs):
        """The cyclone tracks of ``mask`` (a class mask on this grid, or the name of one)
        verified against best tracks: ``best_track`` is a file (IBTrACS CSV or NetCDF,
        HURDAT2) or the table :func:`climnb.io.besttrack.read_best_tracks` gives. Returns a
        :class:`climnb.stats.verify.Verification` (``scores``, ``storms``, ``tracks``); keyword
        arguments (``radius_km``, ``min_wind_kt``, ``start``, ``end``) go to
        :func:`climnb.stats.verify.verify_tracks`. Gaps are bridged as ``climnb tracks`` does;
        ``storms``, the labels' event table, makes the cyclones follow the labeller's stitched
        tracks, as ``climnb tracks`` does with the table beside the labels."""
        mask = self._ds[mask] if isinstance(mask, str) else mask
        canonical = self._canonical(mask).assign_attrs(mask.attrs)
        config = TrackConfig(max_gap_steps=default_max_gap(canonical))
        obs = track_events(canonical, config, storms=storms)
        if not isinstance(best_track, pd.DataFrame):
            best_track = read_best_tracks(best_track)
        times = canonical.time.values
        kwargs = {"start": times[0], "end": times[-1], **kwargs}
        return verify_tracks(obs, best_track, **kwargs)

    def explore(
        self,
        prediction: xr.DataArray | None = None,
        *,
        labels: xr.DataArray | str | None = None,
        **kwargs,
    ):
        """The segmentation explorer (:func:`climnb.viz.explorer.segmentation_explorer`).

        ``labels`` defaults to the Dataset's ``truth`` or ``labels`` variable, else heuristic
        labels; ``prediction`` defaults to the heuristic labels (so, without a network, the
        explorer compares them with the truth). Keyword arguments go to the explorer.
        """
        from climnb.viz.explorer import segmentation_explorer

        if isinstance(labels, str):
            labels = self._ds[labels]
        if labels is None:
            labels = next((self._ds[v] for v in ("truth", "labels") if v in self._ds), None)
        heuristic = None
        if labels is None or prediction is None:
            heuristic = self.label().load()
        labels = heuristic if labels is None else labels
        prediction = heuristic if prediction is None else prediction
        fields = normalize(self._ds)
        return segmentation_explorer(
            fields, self._canonical(labels), self._canonical(prediction), **kwargs
        )

    # --- statistics (climnb.stats) ---
    def frequency(self, mask: xr.DataArray | str | None = None, by: str = "all") -> xr.Dataset:
        """Fraction of time steps each point lies in each class, lazily, on this grid.

        ``mask``: a class mask on this grid, the name of one in the Dataset, or ``None`` for
        the Dataset's own (prediction, labels, truth, LABELS); ``by``: ``"all"``, ``"season"``
        or ``"month"`` (see :func:`climnb.stats.frequency`).
        """
        mask = self._ds[mask] if isinstance(mask, str) else mask
        mask = class_mask(self._ds if mask is None else mask)
        freq = frequency(self._canonical(mask).assign_attrs(mask.attrs), by)
        return input_grid(self._ds).restore(freq)

    def _canonical(self, mask: xr.DataArray) -> xr.DataArray:
        """A mask on this Dataset's grid, put on the canonical grid (as the fields are)."""
        name = mask.name or "mask"
        return normalize(mask.to_dataset(name=name), required=[name])[name]
