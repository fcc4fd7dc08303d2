"""MNIST-1D's generator (Greydanus 2020), in the core install.

Ten one-dimensional digit templates, each padded, stretched, scaled, shifted, drowned in
correlated and white noise, sheared and cut to 40 samples. This is the generator of the
``mnist1d`` package (github.com/greydanus/mnist1d, ``mnist1d/data.py`` and
``transform.py``, version 0.0.2.post1; Copyright 2020 Sam Greydanus, 2024 Sam Greydanus and
Peter Steinbach; Apache License 2.0), rewritten to draw from its own random state instead
of numpy's global one: it draws the same numbers in the same order, so for the same
settings and seed it returns the package's arrays bit for bit (``tests/test_data.py``
compares them), without the package, its download or its matplotlib.
"""

from __future__ import annotations

import numpy as np
from scipy.interpolate import interp1d
from scipy.ndimage import gaussian_filter

__all__ = ["SETTINGS", "templates", "make_mnist1d"]

SETTINGS = {"template_len": 12, "padding": (36, 60), "scale_coeff": 0.4,
            "max_translation": 48, "corr_noise_scale": 0.25, "iid_noise_scale": 2e-2,
            "shear_scale": 0.75, "final_seq_length": 40}
"""The generator's settings and their defaults (the package's ``get_dataset_args``)."""


def templates() -> tuple[np.ndarray, np.ndarray]:
    """The ten digit templates, (10, 12), each whitened and starting at 0, and their time
    grid, (12,)."""
    x = np.array([[5, 6, 6.5, 6.75, 7, 7, 7, 7, 6.75, 6.5, 6, 5],
                  [5, 3, 3, 3.4, 3.8, 4.2, 4.6, 5, 5.4, 5.8, 5, 5],
                  [5, 6, 6.5, 6.5, 6, 5.25, 4.75, 4, 3.5, 3.5, 4, 5],
                  [5, 6, 6.5, 6.5, 6, 5, 5, 6, 6.5, 6.5, 6, 5],
                  [5, 4.4, 3.8, 3.2, 2.6, 2.6, 5, 5, 5, 5, 5, 5],
                  [5, 3, 3, 3, 3, 5, 6, 6.5, 6.5, 6, 4.5, 5],
                  [5, 4, 3.5, 3.25, 3, 3, 3, 3, 3.25, 3.5, 4, 5],
                  [5, 7, 7, 6.6, 6.2, 5.8, 5.4, 5, 4.6, 4.2, 5, 5],
                  [5, 4, 3.5, 3.5, 4, 5, 5, 4, 3.5, 3.5, 4, 5],
                  [5, 4, 3.5, 3.5, 4, 5, 5, 5, 5, 4.7, 4.3, 5]])
    x -= x.mean(1, keepdims=True)
    x /= x.std(1, keepdims=True)
    x -= x[:, :1]  # every signal starts and ends at 0
    return x / 6.0, np.linspace(-5, 5, x.shape[1]) / 6.0


def _resample(x: np.ndarray, n: int) -> np.ndarray:
    """x (m,) linearly interpolated at n evenly spaced points of the same interval."""
    return interp1d(np.linspace(0, 1, len(x)), x, axis=0, kind="linear")(np.linspace(0, 1, n))


def _transform(x: np.ndarray, rng: np.random.RandomState, s: dict) -> np.ndarray:
    """One example from template x (12,): (final_seq_length,). The draws, in the package's
    order: padding, scale, translation, correlated noise, white noise, shear."""
    low, high = s["padding"]
    x = np.concatenate([x + 1e-8, np.zeros(low + int(rng.rand() * (high - low + 1)))])
    x = _resample(x, s["template_len"] + high)  # stretched to one length
    x = x * (1 + s["scale_coeff"] * (rng.rand() - 0.5))
    k = rng.choice(s["max_translation"])
    x = np.concatenate([x[-k:], x[:-k]])  # shifted circularly by k
    signal = x != 0
    x = signal * x + (1 - signal) * gaussian_filter(s["corr_noise_scale"] * rng.randn(len(x)), 2)
    x = x + s["iid_noise_scale"] * rng.randn(len(x))
    x = x - s["shear_scale"] * (rng.rand() - 0.5) * np.linspace(-0.5, 0.5, len(x))
    return _resample(x, s["final_seq_length"])


def make_mnist1d(num_samples: int = 5000, seed: int = 42, train_split: float = 0.8,
                 **settings) -> dict[str, np.ndarray]:
    """The data set: ``x`` (n_train, 40) and ``y`` (n_train,), ``x_test`` and ``y_test``;
    ``num_samples // 10`` examples per digit, shuffled, centred and scaled to unit standard
    deviation over the whole set, the first ``train_split`` of them for training.
    ``settings``: any of :data:`SETTINGS` (the caller checks them)."""
    s = {**SETTINGS, **settings}
    rng = np.random.RandomState(seed)  # the package seeds numpy's global legacy generator
    x_templates, _ = templates()
    per_class = num_samples // len(x_templates)
    xs = np.stack([_transform(template, rng, s) for template in x_templates
                   for _ in range(per_class)])
    ys = np.repeat(np.arange(len(x_templates)), per_class)
    order = rng.permutation(len(ys))
    xs, ys = xs[order], ys[order]
    xs = (xs - xs.mean()) / xs.std()
    split = int(len(ys) * train_split)
    return {"x": xs[:split], "y": ys[:split], "x_test": xs[split:], "y_test": ys[split:]}
