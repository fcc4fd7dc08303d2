"""The sizes of the three training chapters, in both modes, in one place.

Chapters 8, 9 and 10 have one switch, ``MODE``: ``"cpu"`` (the default, what the website shows:
each chapter in a few minutes on a CPU) or ``"gpu"`` (longer sequences and wider models,
sized to finish within 20 minutes on a Colab T4). The chapters read their sizes from here,
and so do ``tests/test_gpu_mode.py`` (which runs the GPU mode's code paths) and
``benchmarks/estimate_gpu_mode.py`` (which estimates the GPU mode's time and memory from
XLA's cost analysis), so the numbers exist once.
"""

from __future__ import annotations

from annotated_ssm.config import ModelConfig, TrainConfig

__all__ = ["MODES", "training_chapter", "selective_chapter", "duality_chapter"]

MODES = ("cpu", "gpu")


def _check_mode(mode: str) -> None:
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}; got {mode!r}.")


def training_chapter(mode: str) -> dict:
    """Chapter 8's sizes: the four-layer comparison on MNIST-1D (``DATASET``, ``MODEL``,
    ``RECIPE``), the generator (``GENERATE``) and the long-range ablation (``LONG``: the
    data's length and size; ``LONG_MODEL``, ``LONG_RECIPE``: S4D classifiers that read the
    last step).

    The comparison keeps its data, grid and step budget in both modes; the GPU mode makes
    the model wider and deeper. The ablation's GPU mode has sequences four times longer,
    with the Δ range divided by four, so that the memories 1/Δ cover the same share of the
    sequence, and two blocks of width 32 instead of one of width 16; its evaluation runs in
    batches of 100 (XLA plans under 1 GiB for one).
    """
    _check_mode(mode)
    gpu = mode == "gpu"
    long_length = 4096 if gpu else 1024
    step_scale = 1024 / long_length
    return dict(
        DATASET="mnist1d",
        MODEL=ModelConfig(d_model=128 if gpu else 64, n_layers=4 if gpu else 2,
                          state_size=64 if gpu else 32, bidirectional=True, step_min=0.01,
                          step_max=1.0),
        RECIPE=TrainConfig(epochs=15, batch_size=50, lr=1e-2, ssm_lr=2e-3, weight_decay=0.0,
                           progress=False),
        GENERATE=dict(d_model=128 if gpu else 64, n_layers=4 if gpu else 2, epochs=30),
        LONG=dict(length=long_length, num_samples=2500),
        LONG_MODEL=ModelConfig(layer="s4d", d_model=32 if gpu else 16, n_layers=2 if gpu else 1,
                               state_size=64, pooling="last", step_min=1e-3 * step_scale,
                               step_max=1e-1 * step_scale),
        LONG_RECIPE=TrainConfig(epochs=10, batch_size=25, lr=1e-2, ssm_lr=2e-3,
                                weight_decay=0.0, eval_batch_size=100 if gpu else 500,
                                progress=False),
    )


def selective_chapter(mode: str) -> dict:
    """Chapter 9's sizes: the selective-copying task (``TASK``), the models (``WIDTH``,
    ``STATE``), the training budget (``STEPS`` of ``BATCH`` sequences, one run per rate of
    ``LEARNING_RATES``) and the evaluation's batch (``EVAL_BATCH``, chosen from XLA's memory
    plan of the S6 model's forward pass: ``benchmarks/estimate_gpu_mode.py`` prints it)."""
    _check_mode(mode)
    if mode == "gpu":
        return dict(TASK=dict(length=128, n_memorize=8, vocab=8), WIDTH=64, STATE=16,
                    STEPS=3000, BATCH=32, LEARNING_RATES=(2e-3, 5e-3), EVAL_BATCH=500)
    return dict(TASK=dict(length=32, n_memorize=4, vocab=8), WIDTH=32, STATE=8, STEPS=600,
                BATCH=32, LEARNING_RATES=(2e-3, 5e-3), EVAL_BATCH=500)


def duality_chapter(mode: str) -> dict:
    """Chapter 10's sizes: the associative-recall task (``TASK``: key-value pairs per
    sequence, keys and values to draw from), the three models (``WIDTH``, ``STATE``, and
    ``HEAD_DIM``, the channels of a Mamba-2 head), the training budget (``STEPS`` of
    ``BATCH`` fresh sequences at ``LEARNING_RATE``, the seeds trained side by side) and the
    test set's size (``TEST``, evaluated in one call).

    The GPU mode has four times the pairs (sequences of 33 tokens instead of 9) from four
    times the keys, twice the values, width and state, and five times the steps, of twice
    the sequences, at half the learning rate."""
    _check_mode(mode)
    if mode == "gpu":
        return dict(TASK=dict(pairs=16, keys=32, values=16), WIDTH=64, STATE=16, HEAD_DIM=16,
                    STEPS=3000, BATCH=64, LEARNING_RATE=5e-3, TEST=1000)
    return dict(TASK=dict(pairs=4, keys=8, values=8), WIDTH=32, STATE=8, HEAD_DIM=16, STEPS=600,
                BATCH=32, LEARNING_RATE=1e-2, TEST=1000)
