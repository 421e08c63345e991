"""The figure of compared runs as panels (``spec.PanelSpec``), independent of how it is drawn: calibrators by
colour, runs by line style, and the grid's panels split by one of the two factors (see ``LAYOUTS``).

Used by the window's comparison view and by ``calibview report --compare``. Pure Python (no Qt).
"""

from __future__ import annotations

from pathlib import Path

from calibview.plot.spec import CurveItem, PanelSpec, split_panels

__all__ = ["LAYOUTS", "MARK", "comparison_panels", "run_keys"]

#: (layout key, what the window's switch says): a panel per calibrator (the runs overlaid in each, the default),
#: a panel per run (the calibrators overlaid in each), or everything in one overlay.
LAYOUTS = (("calibrator", "A panel per calibrator"), ("run", "A panel per run"), ("overlay", "Overlay"))
#: Marks a difference whose paired interval excludes 0.
MARK = "●"


def run_keys(evaluations) -> list[str]:
    """The name of each compared run as the figure shows it: its model (compared runs share the dataset), with
    the file's name where two files hold a run of the same model."""
    names = [ev.run.model or ev.run.name for ev in evaluations]
    return [f"{n} ({Path(ev.run.file).name})" if names.count(n) > 1 else n for n, ev in zip(names, evaluations)]


def _ece_caption(items, comparison) -> str:
    """ "ΔECE vs reference: resnet110-flsd53 -0.69 ●": each other run's ECE difference (points) to the reference
    in a calibrator's panel (the legend has the ECE values), ● once the comparison says its paired interval
    excludes 0 (the interval is in the Compare tab)."""
    ref = next((it for it in items if it.is_reference), None)
    if ref is None:
        return ""
    parts = []
    for it in items:
        if it is ref:
            continue
        ev = it.evaluation
        delta = 100 * (it.result.metrics["ece"].value - ref.result.metrics["ece"].value)
        row = None
        if comparison is not None:
            try:
                row = comparison.row(ev.run.name, it.result.name, ev.run.file)
            except StopIteration:
                row = None
        parts.append(f"{ev.run.model} {delta:+.2f}" + (f" {MARK}" if row is not None and row["significant_ece"]
                                                         else ""))
    return "ΔECE vs reference: " + " · ".join(parts) if parts else ""


def comparison_panels(evaluations, layout: str = "calibrator", comparison=None) -> list[PanelSpec]:
    """The panels of compared runs (``evaluations``, the reference first) in ``layout`` (a key of LAYOUTS):
    calibrators by colour (``color_key`` = calibrator name), runs by line style (``dash_key`` = the run).
    ``comparison`` (optional, with ``row(run, calibrator, file)``) marks the significant ECE differences."""
    evaluations = tuple(evaluations)
    keys = run_keys(evaluations)
    items, evs = [], {}
    for ev, key in zip(evaluations, keys):
        for r in ev.results:
            # unique labels (hiding goes by label); in a panel per calibrator its title names the calibrator, so
            # its short name keeps the legend inside a narrow panel
            label = f"{key} · {r.name if layout == 'calibrator' else r.label}"
            it = CurveItem(result=r, label=label, color_key=r.name, dash_key=key, k=ev.k)
            items.append(it)
            evs[id(it)] = ev
    if not items:
        return []
    ref = keys[0]
    split, n = evaluations[0].request.eval_split, evaluations[0].n_eval
    if layout == "overlay":
        dataset = evaluations[0].run.dataset
        return [PanelSpec(title=f"{len(evaluations)} runs on {dataset} {split} (N = {n:,})",
                          subtitle="line style: run · colour: calibrator", items=tuple(items))]
    if layout == "calibrator":
        def caption(key, its):
            return _ece_caption([_WithEv(it.result, evs[id(it)], evs[id(it)] is evaluations[0]) for it in its],
                                comparison)
        return split_panels(items, panel_of=lambda it: it.color_key, layout="grid",
                            title_of=lambda key, its: its[0].result.label, subtitle_of=caption)
    return split_panels(items, panel_of=lambda it: it.dash_key, layout="grid",
                        title_of=lambda key, its: key + (" (reference)" if key == ref else ""),
                        subtitle_of=lambda key, its: f"{evaluations[0].run.dataset} {split} · N = {n:,}")


class _WithEv:
    """A curve's result with the evaluation it comes from, as ``_ece_caption`` reads it."""

    __slots__ = ("result", "evaluation", "is_reference")

    def __init__(self, result, evaluation, is_reference: bool) -> None:
        self.result, self.evaluation, self.is_reference = result, evaluation, is_reference
