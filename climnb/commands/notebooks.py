"""``climnb notebooks DIR``: copy the numbered notebooks that came with climnb into a folder,
set to open on the installed kernel that runs this Python (``climnb kernel install``)."""

from climnb.demo import copy_notebooks, packaged_notebooks
from climnb.runtime.kernel import notebook_kernelspec

HELP = "copy the numbered notebooks (without outputs) into a folder; never overwrites your edits"
EXAMPLE = "climnb notebooks ~/nb"


def add_arguments(parser):
    parser.add_argument("dest", metavar="DIR", help="folder to copy them into (made if missing)")


def run(args) -> int:
    source = packaged_notebooks()
    kernelspec = notebook_kernelspec()
    done = copy_notebooks(args.dest, source=source, kernelspec=kernelspec)
    print(f"climnb notebooks from {source} into {done[0].path.parent}:")
    for copy in done:
        note = ": changed since climnb copied it (or not climnb's); left as it is" * (
            copy.action == "kept"
        )
        print(f"  {copy.action:<10} {copy.name}{note}")
    if any(copy.action == "kept" for copy in done):
        print("rename or delete a kept notebook to get climnb's version of it")
    if kernelspec:
        print(f"they open on the kernel '{kernelspec['name']}' ({kernelspec['display_name']})")
    else:
        print(
            "no Jupyter kernel runs this Python yet: run `climnb kernel install --user`, then "
            "this command again, and the copies open on it"
        )
    return 0
