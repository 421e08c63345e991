"""Bandwidth-free calibration statistics of a scalar probability forecast (top-label confidence, or the positive
class of a binary run): nothing here has a smoothing parameter.

- :mod:`.reliability`: the CORP reliability curve (Dimitriadis, Gneiting & Jordan, PNAS 2021), the
  pool-adjacent-violators fit of the outcomes on the forecasts with tied forecasts pooled, its consistency band
  (outcomes redrawn from the forecast) and its bootstrap band;
- :mod:`.curves`: the curve as the diagram draws it and curves.csv tabulates it (steps, both bands and the Brier
  decomposition, on a grid);
- :mod:`.decomposition`: the exact score decomposition S = MCB - DSC + UNC of the Brier and the log score;
- :mod:`.significance`: tests of calibration with p-values, the consistency-resampling test of the ECE (Bröcker
  & Smith 2007) and the kernel SKCE test (Widmann, Lindsten & Zachariah, NeurIPS 2019);
- :mod:`.refinement`: the refinement / calibration split of the NLL and the Brier score (the loss after a
  temperature fitted on the evaluation split itself, Berta et al. 2025), exact over two passes of the rows;
- :mod:`.parts`: these as the engine's metric columns, their point values, bootstrap resamples and tests.

The first three are numpy and scipy only; the last two read torch tensors.
"""
