"""``calibview import SRC -o OUT``: .npz, .npy pairs or .pt logits converted into a calibview HDF5 file (the module
is not called ``import``: that is a Python keyword)."""

from __future__ import annotations

import argparse

from calibview.cli.options import add_input_options

HELP = "convert .npz, .npy pairs or .pt logits into a calibview HDF5 file"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The source, the output and the names of what is written."""
    p.add_argument("src", help="source file (.npz, .npy, .pt, .pth)")
    p.add_argument("-o", "--out", required=True, help="HDF5 file to write (appended to if it exists)")
    p.add_argument("--model", default=None)
    p.add_argument("--dataset", default=None)
    p.add_argument("--split", default=None)
    p.add_argument("--overwrite", action="store_true", help="replace splits that OUT already has")
    add_input_options(p)


def run(args) -> int:
    """Convert, then print each run written with its splits."""
    from calibview.core.io.importers import import_arrays

    runs = import_arrays(args.src, args.out, model=args.model, dataset=args.dataset, split=args.split,
                         overwrite=args.overwrite)
    for info in runs:
        print(f"{args.out}: {info.name} " + ", ".join(f"{s.name} (N={s.n}, K={s.k})" for s in info.splits))
    return 0
