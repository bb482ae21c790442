"""``climnb stage``: copy a sample set onto node-local storage (a staged set per node), reading
each shared file once; training then takes ``--staged DEST``."""

from climnb.io.atomic import atomic_path
from climnb.progress import NO_PROGRESS_HELP, progress

HELP = "stage sample files onto node-local storage (run one MPI process per node)"
EXAMPLE = (
    "mpirun -np 2 climnb stage --source /shared/deepcam "
    "--dest /local/scratch/deepcam --ranks-per-node 4 --samples-per-rank 250"
)


def add_arguments(parser):
    parser.add_argument(
        "--source",
        required=True,
        help="the shared sample set (root with train/ and validation/, or a folder of data-*.h5)",
    )
    parser.add_argument(
        "--dest",
        required=True,
        help="node-local folder; {node} becomes the node number, {local_rank} the local rank "
        "(a folder per rank); without {node}, every process must see its own folder",
    )
    parser.add_argument("--nodes", type=int, help="nodes (default: the number of MPI processes)")
    parser.add_argument("--ranks-per-node", type=int, default=1, help="training ranks per node")
    parser.add_argument(
        "--samples-per-rank",
        type=int,
        default=250,
        help="files drawn with replacement per rank (default 250)",
    )
    parser.add_argument(
        "--draw",
        choices=["replacement", "shard"],
        default="replacement",
        help="replacement (default, the paper's): each rank draws --samples-per-rank files at "
        "random, so some files go to no rank; shard: a seeded permutation dealt out over the "
        "ranks, each file to one rank (at most --samples-per-rank each)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--stats", help="stats.h5 to stage too (default: found beside SOURCE)")
    parser.add_argument(
        "--no-verify",
        dest="verify",
        action="store_false",
        help="on a re-run, trust sizes instead of checking checksums",
    )
    parser.add_argument("--report", help="JSON file for the report (written by rank 0)")
    parser.add_argument("--no-progress", action="store_true", help=NO_PROGRESS_HELP)
    parser.add_argument(
        "--no-mpi",
        dest="mpi",
        action="store_false",
        help="do not use MPI: this process stages every node",
    )


def run(args) -> int:
    import json

    from climnb.data.staging import StagingConfig, stage

    config = StagingConfig(
        source=args.source,
        dest=args.dest,
        n_nodes=args.nodes,
        ranks_per_node=args.ranks_per_node,
        samples_per_rank=args.samples_per_rank,
        seed=args.seed,
        draw=args.draw,
        verify=args.verify,
        stats=args.stats,
    )
    comm = _world() if args.mpi else None
    rank0 = comm is None or comm.rank == 0
    enabled = not args.no_progress and rank0
    bar = progress(desc="staging (rank 0)", unit="file", enabled=enabled)
    try:
        with bar:
            report = stage(config, comm, progress=bar.update)
    except Exception as err:
        if comm is not None and comm.size > 1:  # the other ranks would wait for ever
            import sys
            import traceback

            if isinstance(err, ValueError):  # bad input: a line naming it, no traceback
                print(f"climnb stage: error (rank {comm.rank}): {err}", file=sys.stderr, flush=True)
            else:
                traceback.print_exc()
            comm.Abort(2)
        raise
    if comm is None or comm.rank == 0:
        print(report.summary)
        if args.report:
            with atomic_path(args.report) as tmp:
                tmp.write_text(json.dumps(report.to_dict(), indent=1))
    return 0


def _world():
    import os

    try:
        from mpi4py import MPI
    except ImportError:
        launched = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "SLURM_STEP_NUM_TASKS")
        if any(int(os.environ.get(v, "1") or 1) > 1 for v in launched):
            raise ImportError(
                "climnb stage under an MPI launcher needs mpi4py: "
                "pip install mpi4py (built against this MPI)"
            ) from None
        return None
    return MPI.COMM_WORLD
