"""``calibview import SRC -o OUT``: .npz, .npy pairs or .pt logits, or a CSV table (top-label columns or one column
per class), converted into a calibview HDF5 file (the module is not called ``import``: that is a Python keyword)."""

from __future__ import annotations

import argparse

from calibview.cli.options import add_input_options, add_lock_options
from calibview.startup import add_log_options

HELP = "convert .npz, .npy pairs, .pt logits or a .csv (or .parquet) table into a calibview HDF5 file"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The source, the output and the names of what is written."""
    p.add_argument("src", help="source file (.npz, .npy, .pt, .pth, .csv, .parquet)")
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
    table = p.add_argument_group("CSV tables (docs/FORMAT.md, \"CSV tables\")")
    table.add_argument("--label-col", default=None, metavar="NAME",
                       help="the column of the true class (default: label, true_label, y or target)")
    table.add_argument("--pred-col", default=None, metavar="NAME",
                       help="the column of the predicted class (default: prediction, pred_label, pred or y_pred)")
    table.add_argument("--conf-col", default=None, metavar="NAME",
                       help="the column of the predicted class's probability (default: confidence, conf, score "
                            "or prob)")
    table.add_argument("--num-classes", type=int, default=None, metavar="K",
                       help="the number of classes of a top-label table (default: unknown)")
    add_log_options(p)
    add_input_options(p)
    add_lock_options(p)


def run(args) -> int:
    """Convert, then print each run written with its splits (a binary conversion: a note on stderr)."""
    import logging

    from calibview.core.io.importers import import_arrays

    if args.src.lower().endswith((".csv", ".parquet", ".pq")):
        return _run_csv(args)
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


def _run_csv(args) -> int:
    """A CSV or Parquet table, streamed in chunks (a progress bar on a terminal)."""
    from calibview.cli.options import ProgressBar
    from calibview.core.io.csv_import.stream import import_csv

    reader = import_csv
    if not args.src.lower().endswith(".csv"):
        from calibview.core.io.csv_import.parquet import import_parquet as reader
    bar = ProgressBar(enabled=False if getattr(args, "quiet", False) else None)
    try:
        runs = reader(args.src, args.out, model=args.model, dataset=args.dataset, split=args.split,
                          label_col=args.label_col, pred_col=args.pred_col, conf_col=args.conf_col,
                          num_classes=args.num_classes, overwrite=args.overwrite, progress=bar)
    finally:
        bar.done()
    for info in runs:
        print(f"{args.out}: {info.name} " + ", ".join(f"{s.name} (N={s.n}, {s.kind}, K={s.k or '?'})"
                                                     for s in info.splits))
    return 0
