"""HoloViews views of fields, labels and segmentations. Import the submodules directly."""
