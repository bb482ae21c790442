"""``climnb predict``: segment new climate data with a trained model bundle, to NetCDF."""

HELP = "run a trained model over NetCDF fields or DeepCAM sample files, writing NetCDF"
EXAMPLE = "climnb predict --model runs/toy/bundle data/new/*.nc --out predictions.nc"


def add_arguments(parser):
    parser.add_argument("--model", required=True, help="model bundle directory (save_bundle)")
    parser.add_argument(
        "inputs",
        nargs="+",
        metavar="INPUT",
        help="NetCDF files or globs, DeepCAM sample files (*.h5) or a directory of them",
    )
    parser.add_argument("--out", required=True, help="NetCDF file to write")
    parser.add_argument("--batch-size", type=int, default=4, help="time steps per batch")
    parser.add_argument(
        "--probabilities", action="store_true", help="also write per-class probabilities"
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def run(args) -> int:
    import xarray as xr

    from climnb.atomic import atomic_path
    from climnb.bundle import load_bundle
    from climnb.predict import predict

    bundle = load_bundle(args.model)
    out = predict(
        bundle,
        args.inputs,
        batch_size=args.batch_size,
        probabilities=args.probabilities,
        progress=not args.no_progress,
    )
    ds = out if isinstance(out, xr.Dataset) else out.to_dataset()
    encoding = {"prediction": {"dtype": "u1", "zlib": True}}
    if "probability" in ds:
        encoding["probability"] = {"zlib": True}
    with atomic_path(args.out) as tmp:
        ds.to_netcdf(tmp, encoding=encoding)
    counts = [int((ds.prediction == k).sum()) for k in range(bundle.n_classes)]
    total = max(sum(counts), 1)
    shares = ", ".join(
        f"{n} {100 * c / total:.2f}%" for n, c in zip(bundle.class_names, counts, strict=True)
    )
    print(
        f"{ds.sizes['time']} steps segmented with {bundle.name} ({bundle.preset}) "
        f"-> {args.out}\n  {shares}"
    )
    return 0
