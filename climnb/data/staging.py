"""Stage a sample set from the shared file system onto node-local storage: a staged set per node.

Every local rank of every node trains on its own ``samples_per_rank`` files, drawn with
replacement from the set's training files with a seed (the paper used 250; ``draw="shard"``
deals the files out instead, each to one rank, so that every file is trained on), and validates on
its share of the validation files (``validation[rank::ranks]``, when the source has them). A
node stores each file it needs once, with ``stats.h5``, and a manifest listing every file's
SHA-256 and each local rank's files in training order: a
:class:`climnb.io.sampleset.StagedSet`, which training opens from a folder pattern with
``{node}`` / ``{local_rank}`` placeholders and never looks beyond. Each file is read from the
shared file system **at most once** across the whole job: one process that needs it reads it
and sends the bytes over MPI to the other processes that need it.

How the exchange runs (:func:`stage`, :mod:`climnb.data.stagerun`): rank 0 opens the source
:class:`~climnb.io.sampleset.SampleSet` and broadcasts names, sizes and content digests (from the
source manifests; :mod:`climnb.data.stagesource`); all ranks derive the same plan
(:mod:`climnb.data.stageplan`) and claim their folders (:mod:`climnb.data.stagedest`); every
process checks what it already has (resume; :mod:`climnb.data.stagemanifest`) and the ranks
exchange what they still need (:mod:`climnb.data.exchange`); each file still needed
gets one reader, the needing process with the fewest bytes to read so far. The reads then
proceed in rounds: in round ``k`` every process reads its ``k``-th file and the round's files
travel with non-blocking point-to-point messages (raw bytes plus the SHA-256 the reader
computed). Every holder checks the digest against the source manifest's, so a shared file that
changed or rotted since it was written is refused, naming it, on every rank. Files are written
atomically, each followed by a line in the node's journal; the manifest closes the run. A rerun
skips a staged file only when its recorded digest equals the source manifest's (sizes are never
trusted) and, with ``verify``, the local bytes still hash to it; a changed ``stats.h5`` is
restaged too. Temporary files of a killed run are removed on the next.

One MPI process per node is the expected layout (``mpirun -np NODES`` or one ipyparallel
engine per node); :func:`stage_on_engines` (:mod:`climnb.data.stageengines`) also takes several
engines per node (the training engines, one per GPU: the first engine of each node stages it).
A process may also stand for several simulated nodes (``dest`` then must contain ``{node}``),
and without MPI one process stages all nodes. Processes whose ``dest`` is the same directory (a
shared file system, no ``{node}``) are detected and refused.

Examples
--------
>>> import tempfile
>>> from pathlib import Path
>>> from climnb.data.synthetic import make_dataset
>>> from climnb.io.samples import write_samples
>>> from climnb.io.sampleset import StagedSet
>>> shared, local = Path(tempfile.mkdtemp()), Path(tempfile.mkdtemp())
>>> ds, _ = make_dataset(n_time=6, seed=0)
>>> _ = write_samples(ds, ds.truth, shared)
>>> cfg = StagingConfig(source=str(shared), dest=str(local / "node{node}"), n_nodes=2,
...                     ranks_per_node=2, samples_per_rank=4, seed=1)
>>> report = stage(cfg)
>>> report.max_reads_per_file, report.bytes_read <= report.bytes_shared
(1, True)
>>> len(StagedSet.open(local / "node{node}", node=0, local_rank=1).files("train"))
4

This module is the door: its names are defined in the modules named above.
"""

from __future__ import annotations

from climnb.data.stageconfig import StagingConfig, StagingReport
from climnb.data.stageengines import stage_on_engines
from climnb.data.stagemanifest import staged_files
from climnb.data.stageplan import DRAWS, StagingPlan, check_draw, files_per_rank, plan_staging
from climnb.data.stagerun import stage
from climnb.data.stagesource import MAX_DRAWS_PER_FILE

__all__ = [
    "DRAWS",
    "MAX_DRAWS_PER_FILE",
    "StagingConfig",
    "StagingPlan",
    "StagingReport",
    "check_draw",
    "files_per_rank",
    "plan_staging",
    "stage",
    "stage_on_engines",
    "staged_files",
]
