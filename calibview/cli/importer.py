"""``calibview import SRC -o OUT``: .npz, .npy pairs or .pt logits converted into a calibview HDF5 file (the module
is not called ``import``: that is a Python keyword)."""

from __future__ import annotations

import argparse

from calibview.cli.options import add_input_options, add_lock_options
from calibview.startup import add_log_options

HELP = "convert .npz, .npy pairs or .pt logits into a calibview HDF5 file"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The source, the output and the names of what is written."""
    p.add_argument("src", help="source file (.npz, .npy, .pt, .pth)")
    p.add_argument("-o", "--out", required=True, help="HDF5 file to write (appended to if it exists)")
    p.add_argument("--model", default=None)
    p.add_argument("--dataset", default=None)
    p.add_argument("--split", default=None)
    p.add_argument("--overwrite", action="store_true", help="replace splits that OUT already has")
    binary = p.add_mutually_exclusive_group()
    binary.add_argument("--binary-logits", dest="binary", action="store_const", const="logits",
                        help="(N,) or (N, 1) scores are logits z of class 1, stored as [0, z] (default: by the "
                             "array's name; unnamed: logits unless every value lies in [0, 1])")
    binary.add_argument("--binary-probs", dest="binary", action="store_const", const="probs",
                        help="(N,) or (N, 1) scores are probabilities p of class 1, stored as [1 - p, p]")
    add_log_options(p)
    add_input_options(p)
    add_lock_options(p)


def run(args) -> int:
    """Convert, then print each run written with its splits (a binary conversion: a note on stderr)."""
    import logging

    from calibview.core.io.importers import import_arrays

    notes: list[str] = []
    runs = import_arrays(args.src, args.out, model=args.model, dataset=args.dataset, split=args.split,
                         overwrite=args.overwrite, binary=args.binary, notes=notes)
    for note in notes:               # the rule as the user chose it: the flag, not the parameter
        for kind in ("logits", "probs"):
            note = note.replace(f"binary={kind!r}", f"--binary-{kind}")
        logging.getLogger("calibview").warning(f"note: {note}")
    for info in runs:
        form = f" regression: {info.describe()}," if hasattr(info, "describe") else ""
        print(f"{args.out}: {info.name}{form} " + ", ".join(f"{s.name} (N={s.n}" + (f", K={s.k})" if not form else ")")
                                                          for s in info.splits))
    return 0
