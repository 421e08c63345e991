"""The row-wise primitives against the torch and numpy one-liners they stand for, on ties, NaNs, infinities,
transposed and flipped views, and on both sides of the column count where row_argmax switches library."""

import numpy as np
import pytest
import torch

from calibview.core.stats.rowwise import NUMPY_ARGMAX_FROM, entries_above, nonzero_2d, row_argmax


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16])
def test_row_argmax_is_torch_argmax_with_ties_nan_and_strides(dtype):
    g = torch.Generator().manual_seed(0)
    rng = np.random.default_rng(0)
    for trial in range(200):
        # K on both sides of NUMPY_ARGMAX_FROM: torch's argmax below it, numpy's from it on
        n = int(rng.integers(1, 40))
        k = int(rng.integers(1, 8)) if trial % 2 else int(rng.integers(NUMPY_ARGMAX_FROM, NUMPY_ARGMAX_FROM + 8))
        x = torch.randint(-2, 3, (n, k), generator=g).to(dtype)      # small integers: many ties
        if trial % 3 == 0:
            x.view(-1)[int(rng.integers(n * k))] = float("nan")
        if trial % 5 == 0:
            x.view(-1)[int(rng.integers(n * k))] = float("-inf")
        for view in (x, x.t(), x.flip(1)):
            assert torch.equal(row_argmax(view), view.argmax(dim=1))


def test_nonzero_2d_is_numpys_nonzero_in_row_major_order():
    rng = np.random.default_rng(1)
    for trial in range(100):
        n, k = int(rng.integers(0, 30)), int(rng.integers(1, 40))
        mask = rng.random((n, k)) < rng.choice([0.0, 0.02, 0.5, 1.0])
        for view in (mask, mask.T, mask[:, ::-1]):
            want_r, want_c = np.nonzero(view)
            rows, cols = nonzero_2d(view)
            np.testing.assert_array_equal(rows, want_r)
            np.testing.assert_array_equal(cols, want_c)
            assert rows.dtype == cols.dtype == np.int64


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32, torch.float64, torch.bfloat16])
def test_entries_above_is_torch_nonzero_with_nan_inf_and_strides(dtype):
    rng = np.random.default_rng(2)
    for trial in range(100):
        n, k = int(rng.integers(1, 30)), int(rng.integers(1, 50))
        x = torch.from_numpy(rng.random((n, k))).to(dtype)
        x.view(-1)[int(rng.integers(n * k))] = float("nan")          # never above: as torch's comparison
        x.view(-1)[int(rng.integers(n * k))] = float("inf")
        threshold = float(rng.choice([1 / 15, 0.5, 0.99, 2.0]))
        for view in (x, x.t(), x.flip(1)):
            want = (view > threshold).nonzero(as_tuple=True)
            got = entries_above(view, threshold)
            for w, g in zip(want, got):
                assert torch.equal(g, w)
                assert g.dtype == torch.int64
