"""The strict parameter rules accept what every calibrator's real fit writes (through its JSON) and refuse
parameters of the wrong shape, type or range."""

import json

import numpy as np
import pytest
import torch

from calibview.core import calibrators as calib
from calibview.core.release import strict


def _scores(k, n=400, seed=0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, k, n)
    z = 2.0 * (rng.normal(size=(n, k)) + 1.5 * np.eye(k)[y])
    return torch.log_softmax(torch.from_numpy(z), dim=1), torch.from_numpy(y)


@pytest.mark.parametrize("method,options,k", [("ts", None, 4), ("ts-grid", None, 4), ("hb", None, 4),
                                              ("hb", {"strategy": "quantile", "bins": 5}, 4), ("ir", None, 4),
                                              ("mrr", None, 4), ("vs", None, 4), ("ms", None, 4),
                                              ("dirichlet", None, 4), ("platt", None, 2), ("beta", None, 2),
                                              ("none", None, 3)])
def test_every_real_fit_passes_the_rules(method, options, k):
    s, y = _scores(k)
    fitted = calib.fit(method, s, y, options=options)
    params = json.loads(json.dumps(fitted.to_json()))["params"]       # as a config stores them
    strict.check_params(method, params, k)


@pytest.mark.parametrize("method,params,k", [
    ("ts", {"temperature": [1.5]}, 3), ("ts", {}, 3), ("ts", {"temperature": 0}, 3), ("ts", {"temperature": -1}, 3),
    ("ts", {"temperature": True}, 3), ("ts", {"temperature": "1.5"}, 3), ("ts", [1.5], 3),
    ("vs", {"w": [1, 1], "b": [0, 0, 0]}, 3), ("vs", {"w": [1, 1, "x"], "b": [0, 0, 0]}, 3),
    ("ms", {"W": [[1, 0], [0, 1]], "b": [0, 0, 0]}, 3), ("platt", {"a": 1.0, "c": 0.0}, 3),
    ("platt", {"a": 1.0}, 2), ("mrr", {"accuracy": 1.5}, 3),
    ("hb", {"bins": 2, "strategy": "uniform", "edges": [0, 0.5, 1], "value": [[0.1, 2.0]] * 3}, 3),
    ("hb", {"bins": 2, "strategy": "uniform", "edges": [0, 0.7, 0.5], "value": [[0.1, 0.2]] * 3}, 3),
    ("ir", {"x": [0.1, 0.2], "y": [0.1, 0.2], "offsets": [0, 1, 2, 2]}, 3),
    ("ir", {"x": [0.1, 0.2, 0.3], "y": [0.1, 0.2, 0.3], "offsets": [0, 1, 2, 4]}, 3),
])
def test_malformed_params_are_refused(method, params, k):
    with pytest.raises(strict._Bad):
        strict.check_params(method, params, k)
