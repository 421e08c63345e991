"""``calibview collect SCRIPT.py:FUNC -o OUT``: logits collected from a torch model that a script of the user's
builds. ``FUNC`` returns ``(model, loader, names)``: the ``torch.nn.Module``, an iterable of ``(inputs, labels)``
or ``(inputs, labels, meta_dict)`` batches, and ``names``, the class names (K strings, ``names[k]`` naming logit
column k) or None. It is called with the split's name when it takes an argument (``def build(split)``), with none
otherwise. The collection itself is :func:`calibview.core.io.collect.collector.collect`, which
``calibview.collect_logits`` calls too."""

from __future__ import annotations

import argparse
import os

from calibview.startup import add_log_options

HELP = "collect the logits of a torch model that SCRIPT.py:FUNC builds into a calibview HDF5 file"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The script and function, the output, the run's names and how the logits are collected."""
    p.add_argument("target", metavar="SCRIPT.py:FUNC",
                   help="a Python file and a function in it returning (model, loader, names): names are the K class "
                        "names (or None); FUNC gets the split name when it takes an argument")
    p.add_argument("-o", "--out", required=True, help="HDF5 file to write (appended to if it exists)")
    p.add_argument("--model", default=None, help="model name of the run (default: the script's stem)")
    p.add_argument("--dataset", default="data", help="dataset name of the run (default: data)")
    p.add_argument("--split", default="test", help="split to write (default: test)")
    p.add_argument("--members", type=int, default=None, metavar="M",
                   help="also store M MC-dropout passes (only the dropout layers in train mode) as members")
    p.add_argument("--device", default="auto",
                   help="cpu, cuda, cuda:N or auto (default: where the model is, else CUDA when there is one)")
    p.add_argument("--allow-train", action="store_true",
                   help="collect a model left in training mode anyway (in eval mode)")
    add_log_options(p)


def load_target(target: str):
    """The function ``FUNC`` of ``SCRIPT.py:FUNC``, the script loaded as a module (its folder first on sys.path,
    so that it can import its neighbours)."""
    import importlib.util
    import sys

    from calibview.core.errors import CalibviewError

    script, sep, func = target.rpartition(":")
    if not sep or not script or not func.isidentifier():
        raise CalibviewError(f"{target}: give the script and the function as SCRIPT.py:FUNC, e.g. build.py:build.")
    script = os.path.abspath(script)
    if not os.path.isfile(script):
        raise CalibviewError(f"{script}: the script does not exist; check the path.")
    name = "_calibview_collect_" + os.path.splitext(os.path.basename(script))[0].replace("-", "_")
    spec = importlib.util.spec_from_file_location(name, script)
    if spec is None or spec.loader is None:
        raise CalibviewError(f"{script}: cannot be loaded as a Python module; give a .py file.")
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, os.path.dirname(script))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(os.path.dirname(script))
    fn = getattr(module, func, None)
    if not callable(fn):
        raise CalibviewError(f"{script} defines no function {func}; it should return (model, loader, names).")
    return fn


def build(fn, split: str, where: str):
    """``(model, loader, names)`` from the user's function, called with ``split`` when it takes an argument."""
    import inspect

    from calibview.core.errors import CalibviewError

    try:
        takes = any(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL)
                    for p in inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        takes = False
    out = fn(split) if takes else fn()
    if not isinstance(out, (tuple, list)) or len(out) != 3:
        raise CalibviewError(f"{where} returned {type(out).__name__}; it must return (model, loader, names), names "
                             f"being the class names or None.")
    model, loader, names = out
    if names is not None and (isinstance(names, str) or not all(isinstance(n, str) for n in names)):
        raise CalibviewError(f"{where} returned names that are not a list of class-name strings; return K strings "
                             f"or None.")
    return model, loader, names


def run(args) -> int:
    """Build, collect, then print the split written (or already there)."""
    from calibview.core.io.collect.collector import collect

    fn = load_target(args.target)
    script = args.target.rpartition(":")[0]
    model_name = args.model or os.path.splitext(os.path.basename(script))[0]
    model, loader, names = build(fn, args.split, args.target)
    info = collect(model, loader, args.out, model_name, args.dataset, args.split, class_names=names,
                   device=args.device, members=args.members, allow_train=args.allow_train,
                   progress=not args.quiet and args.log_level != "error")
    print(f"{args.out}: {info.path.lstrip('/')} (N={info.n}, K={info.k})")
    return 0
