"""Data to learn from: synthetic fields with a known truth, and sample sets staged per node.

* :mod:`~climnb.data.synthetic` - seeded CAM5-like fields with storms and rivers, and their masks;
* :mod:`~climnb.data.lookalike` - those fields dressed as ERA5, MERRA-2, CAM5 or generic files;
* :mod:`~climnb.data.staging` - a sample set copied onto node-local storage, a staged set per node
  (its names, from: :mod:`~climnb.data.stageconfig`, the settings and the report;
  :mod:`~climnb.data.stagesource`, the shared set listed; :mod:`~climnb.data.stageplan`, which
  files each rank gets; :mod:`~climnb.data.stagedest`, the node-local folders claimed;
  :mod:`~climnb.data.stagemanifest`, what a rerun keeps and the manifest;
  :mod:`~climnb.data.exchange`, each shared file read once and sent where it is needed;
  :mod:`~climnb.data.stagerun`, the run; :mod:`~climnb.data.stageengines`, on ipyparallel
  engines).

Import from the submodules.
"""
