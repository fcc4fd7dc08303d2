"""The GPU mode of chapters 8 and 9 (``MODE = "gpu"``) runs, checked on the CPU.

The chapters read their sizes from ``annotated_ssm.book.recipes``; these tests read the same
sizes. They run the GPU mode's code paths — the long-range ablation's training and batched
evaluation through ``fit`` (at an eighth of its length), chapter 9's S6 training step and
batched evaluation at their full shapes — and compile the full-size programs with XLA's
memory analysis, through ``benchmarks/estimate_gpu_mode.py``, the script whose estimates the
chapters quote.
"""

import dataclasses
import importlib.util
import pathlib
import sys

import jax.numpy as jnp
import numpy as np
import pytest

from annotated_ssm.book.recipes import MODES, selective_chapter, training_chapter
from annotated_ssm.data import load_dataset, selective_copying
from annotated_ssm.train import build_model, count_steps, fit

_SCRIPT = pathlib.Path(__file__).parents[1] / "benchmarks" / "estimate_gpu_mode.py"
_spec = importlib.util.spec_from_file_location("estimate_gpu_mode", _SCRIPT)
estimate = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = estimate  # its dataclass looks its module up there
_spec.loader.exec_module(estimate)

T4_BYTES = estimate.GPUS["T4"][2]


@pytest.mark.parametrize("chapter", [training_chapter, selective_chapter])
def test_both_modes_give_the_same_fields_and_an_unknown_mode_is_refused(chapter):
    cpu, gpu = (chapter(mode) for mode in MODES)
    assert cpu.keys() == gpu.keys()
    with pytest.raises(ValueError, match="mode must be one of .* got 'tpu'"):
        chapter("tpu")


def test_the_gpu_mode_has_longer_sequences_and_wider_models():
    cpu, gpu = training_chapter("cpu"), training_chapter("gpu")
    assert gpu["MODEL"].d_model > cpu["MODEL"].d_model
    assert gpu["LONG"]["length"] > cpu["LONG"]["length"]
    # the Δ range scales with the length: the memories 1/Δ span the same share of a sequence
    for end in ("step_min", "step_max"):
        spans = [getattr(m["LONG_MODEL"], end) * m["LONG"]["length"] for m in (cpu, gpu)]
        assert spans[0] == pytest.approx(spans[1], rel=1e-12)
    cpu, gpu = selective_chapter("cpu"), selective_chapter("gpu")
    assert gpu["TASK"]["length"] > cpu["TASK"]["length"] and gpu["WIDTH"] > cpu["WIDTH"]


def test_the_long_range_ablation_trains_and_evaluates_in_batches_at_an_eighth_of_its_length():
    sizes = training_chapter("gpu")
    data = load_dataset("mnist1d_long", length=sizes["LONG"]["length"] // 8, num_samples=700)
    recipe = dataclasses.replace(sizes["LONG_RECIPE"], max_steps=2)
    assert len(data.x_test) > recipe.eval_batch_size  # the test set takes two batches
    model = build_model(dataclasses.replace(sizes["LONG_MODEL"], layer_options={"init": "rand"}),
                        data, seed=0)
    history = fit(model, data, recipe)
    assert history.steps[-1] == count_steps(recipe, data) == 2
    assert np.isfinite(history.train_loss).all() and np.isfinite(history.test_loss)
    assert 0 <= history.test_accuracy <= 1


def test_chapter_9s_selective_step_and_evaluation_run_at_full_size_and_fit_a_t4():
    sizes = selective_chapter("gpu")
    step, evaluation = estimate.selective_chapter_steps("gpu", layers=("s6",))
    task, M = sizes["TASK"], sizes["TASK"]["n_memorize"]
    x, y = selective_copying(sizes["BATCH"], **task, seed=0)
    params, opt_state, loss = step.run(jnp.asarray(x, jnp.int32), jnp.asarray(y, jnp.int32))
    assert np.isfinite(float(loss))
    x, y = selective_copying(sizes["EVAL_BATCH"], **task, seed=1)
    predicted = np.asarray(evaluation.run(jnp.asarray(x, jnp.int32)))
    assert predicted.shape == (sizes["EVAL_BATCH"], M)
    assert predicted.min() >= 0 and predicted.max() < task["vocab"]
    # XLA's plan on this backend; what the chapter's evaluation batch was chosen from
    assert 0 < step.memory < T4_BYTES and 0 < evaluation.memory < T4_BYTES
    assert step.flops > 0 and step.bytes > 0
