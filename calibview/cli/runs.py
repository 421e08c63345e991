"""``calibview runs [FILE]``: the runs and splits of a file, read from its metadata only (no scores are loaded)."""

from __future__ import annotations

import argparse

from calibview.cli.options import add_input_options

HELP = "list the runs and splits in a file (metadata only)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The file (default: the demo) and what it may do."""
    p.add_argument("file", nargs="?", help="HDF5 logits file (default: the bundled demo)")
    add_input_options(p)


def run(args) -> int:
    """One line per run: its name, K ("?" where a top-label run does not say) and each split's size, kind, dtype and metadata columns."""
    from calibview.core.io import discovery
    from calibview.core.io.demo import demo_path

    file = args.file or str(demo_path())
    for info in discovery.list_runs(file):
        splits = ", ".join(f"{s.name} (N={s.n}, {s.kind}, {s.dtype}"
                           + (f"; meta: {' '.join(s.meta)}" if s.meta else "") + ")" for s in info.splits)
        print(f"{info.name}\tK={info.k or '?'}\t{splits}")      # top-label runs may not know K
    from calibview.cli.regression.commands import runs_lines

    for line in runs_lines(file):
        print(line)
    return 0
