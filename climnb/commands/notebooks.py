"""``climnb notebooks DIR``: copy the numbered notebooks that came with climnb into a folder."""

HELP = "copy the numbered notebooks (without outputs) into a folder; never overwrites your edits"
EXAMPLE = "climnb notebooks ~/nb"


def add_arguments(parser):
    parser.add_argument("dest", metavar="DIR", help="folder to copy them into (made if missing)")


def run(args) -> int:
    from climnb.demo import copy_notebooks, packaged_notebooks

    source = packaged_notebooks()
    done = copy_notebooks(args.dest, source=source)
    print(f"climnb notebooks from {source} into {done[0].path.parent}:")
    for copy in done:
        note = ": changed since climnb copied it (or not climnb's); left as it is" * (
            copy.action == "kept"
        )
        print(f"  {copy.action:<10} {copy.name}{note}")
    if any(copy.action == "kept" for copy in done):
        print("rename or delete a kept notebook to get climnb's version of it")
    return 0
