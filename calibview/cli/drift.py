"""``calibview drift CONFIG NEW_FILE --run R --split shadow``: the shipped calibrator on new labelled data, every
metric against the config's archived value, drift flagged past ``--max-ece-increase`` (exit 1), and with
``--refit-out NEWDIR`` a refit on a seeded half whose new config's ``parent`` is the old ``config_sha256``, written
only when it is no worse than the shipped calibrator on the verify half (else exit 1, unless ``--force``)."""

from __future__ import annotations

import argparse

from calibview.cli.options import add_common_options, add_lock_options

HELP = "compare a shipped config with new labelled data (shadow traffic); optionally refit (exit 1 on drift)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The config, the new data, its run and split, the drift limit, the refit folder and the common options."""
    from calibview.core.release.limits import MAX_ECE_INCREASE      # plain data: no numpy, no torch

    p.add_argument("config", help="inference_config.json written by calibview release")
    p.add_argument("file", help="HDF5 logits file with the new labelled data")
    p.add_argument("--run", required=True, metavar="MODEL/DATASET")
    p.add_argument("--split", required=True, help="the new split, e.g. shadow")
    p.add_argument("--max-ece-increase", type=float, default=MAX_ECE_INCREASE)
    p.add_argument("--refit-out", default=None, metavar="NEWDIR",
                   help="refit on a seeded half, verify on the other; write NEWDIR/inference_config.json when the "
                        "refit is no worse than the shipped calibrator on the acceptance criteria there")
    p.add_argument("--force", action="store_true",
                   help="write the refit even when it is worse (marked in its provenance as forced)")
    p.add_argument("--n-boot", type=int, default=None, help="resamples (default: the config's)")
    p.add_argument("--json", action="store_true", help="print the comparison as JSON")
    add_common_options(p)
    add_lock_options(p)


def run(args) -> int:
    """Compare (and refit) and print the comparison (or its JSON); the exit status says whether it drifted."""
    import json

    from calibview.core.release import config as rel
    from calibview.core.release.drift import drift
    from calibview.core.evaluation.engine import Engine
    from calibview.core.reports.tables import metrics_csv
    from calibview.cli.shared import fmt, out_dir, write_all

    from calibview.core.io.safe_io import refuse_overwriting_inputs

    config = rel.load_config(args.config)
    out = out_dir(args.refit_out) if args.refit_out else None
    if out is not None:          # refused before any work, whether or not the refit is written in the end
        refuse_overwriting_inputs([out / "inference_config.json", out / "metrics.csv"], [args.config, args.file])
    d = drift(Engine(), config, args.file, args.split, run=args.run, max_ece_increase=args.max_ece_increase,
              refit=out is not None, n_boot=args.n_boot, device=args.device, path=args.config, force=args.force)
    write = d.refit is not None and (not d.refit.worse or args.force)
    if args.json:
        record = {"drifted": d.drifted, "ece_increase": d.ece_increase, "max_ece_increase": d.max_ece_increase,
                  "metrics": rel._finite(d.rows), "refit_config_sha256": d.refit.config["config_sha256"] if write
                  else None}
        if d.refit is not None:
            record.update(refit_written=write, refit_worse=list(d.refit.worse))
        print(json.dumps(record, indent=2))
    else:
        print(f"{rel.run_name(config)}: {config['calibrator']['method']} of config {config['config_sha256'][:12]} "
              f"on {args.split} (N={d.checked.evaluation.n_eval}) against {config['provenance']['eval_split']}")
        print(f"{'metric':16s} {'archived':>9s} {'now':>9s} {'interval':>20s} {'change':>9s} {'interval':>20s}")
        for r in d.rows:
            print(f"{r['metric']:16s} {fmt(r['archived']):>9s} {fmt(r['value']):>9s} "
                  f"{'[' + fmt(r['lo']) + ', ' + fmt(r['hi']) + ']':>20s} {fmt(r['delta']):>9s} "
                  f"{'[' + fmt(r['delta_lo']) + ', ' + fmt(r['delta_hi']) + ']':>20s}")
        print(("DRIFT" if d.drifted else "no drift") + f": ECE changed by {fmt(d.ece_increase)} "
              f"(limit +{d.max_ece_increase:g})")
    if d.refit is not None:
        new = d.refit.config
        paths = []
        if write:
            from calibview.core.io.durable.locks import output_lock

            out.parent.mkdir(parents=True, exist_ok=True)
            with output_lock(out):          # one writer of the folder at a time (report and release lock it too)
                paths = write_all(out, {"inference_config.json": rel.config_text(new),
                                        "metrics.csv": metrics_csv(d.refit.rows)}, inputs=[args.config, args.file])
        if not args.json:
            m = new["metrics"]
            old = d.refit.shipped.results[0].metrics["ece"]
            print(f"refit {new['calibrator']['method']} on the fit half (N={new['provenance']['n_fit']}, seed "
                  f"{new['provenance']['fit_rows']['seed']}); on the verify half (N={new['provenance']['n_eval']}) "
                  f"ECE {fmt(old.value)} [{fmt(old.lo)}, {fmt(old.hi)}] shipped -> {fmt(m.get('ece'))} "
                  f"[{fmt(m.get('ece_lo'))}, {fmt(m.get('ece_hi'))}] refitted")
            if d.refit.worse:
                print("refit is worse: " + ("written anyway (--force)" if write else
                                            "not written (--force writes it anyway)"))
                for reason in d.refit.worse:
                    print(f"  {reason}")
            if write:
                print(f"new config {new['config_sha256']} (parent {new['parent']})")
                print("wrote " + ", ".join(str(p) for p in paths))
    return 1 if d.drifted or (d.refit is not None and not write) else 0
