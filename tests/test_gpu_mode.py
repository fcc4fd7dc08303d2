"""The GPU mode of chapters 8, 9 and 10 (``MODE = "gpu"``) runs, checked on the CPU.

The chapters read their sizes from ``annotated_ssm.book.recipes``; these tests read the same
sizes. They run the GPU mode's code paths — the long-range ablation's training and batched
evaluation through ``fit`` (at an eighth of its length), chapter 9's S6 training step and
batched evaluation at their full shapes, chapter 10's three models built at their sizes and
the Mamba-2 model's training step (three seeds side by side) and evaluation at full shape —
and compile the full-size programs with XLA's memory analysis, through
``benchmarks/estimate_gpu_mode.py``, the script whose estimates the chapters quote.
"""

import dataclasses
import importlib.util
import pathlib
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from annotated_ssm.book.recipes import MODES, duality_chapter, selective_chapter, training_chapter
from annotated_ssm.data import load_dataset, selective_copying
from annotated_ssm.model import SequenceClassifier
from annotated_ssm.train import build_model, count_steps, fit

_SCRIPT = pathlib.Path(__file__).parents[1] / "benchmarks" / "estimate_gpu_mode.py"
_spec = importlib.util.spec_from_file_location("estimate_gpu_mode", _SCRIPT)
estimate = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = estimate  # its dataclass looks its module up there
_spec.loader.exec_module(estimate)

T4_BYTES = estimate.GPUS["T4"][2]


@pytest.mark.parametrize("chapter", [training_chapter, selective_chapter, duality_chapter])
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
    cpu, gpu = duality_chapter("cpu"), duality_chapter("gpu")
    assert gpu["TASK"]["pairs"] > cpu["TASK"]["pairs"] and gpu["WIDTH"] > cpu["WIDTH"]
    for sizes in (cpu, gpu):  # distinct keys in every sequence
        assert sizes["TASK"]["pairs"] <= sizes["TASK"]["keys"]


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


def test_chapter_10s_three_models_build_at_the_gpu_modes_sizes():
    sizes = duality_chapter("gpu")  # the CPU mode's build in the chapter itself
    task = sizes["TASK"]
    models = {name: SequenceClassifier(config, task["keys"] + task["values"], task["values"],
                                       rngs=nnx.Rngs(0))
              for name, config in estimate.duality_chapter_configs(sizes).items()}
    assert all(model.d_model == sizes["WIDTH"] for model in models.values())
    mamba2 = models["mamba2"].blocks[0].mixer  # E = 2H channels in heads of HEAD_DIM
    assert mamba2.n_heads * sizes["HEAD_DIM"] == 2 * sizes["WIDTH"]


def recall_batch(task, shape, seed):
    """Token sequences (*shape, 2 · pairs + 1) of chapter 10's layout — key, value, …, key —
    with distinct keys, and the asked key's value (*shape)."""
    rng = np.random.default_rng(seed)
    keys = np.argsort(rng.random(shape + (task["keys"],)), axis=-1)[..., :task["pairs"]]
    values = rng.integers(0, task["values"], shape + (task["pairs"],))
    tokens = np.empty(shape + (2 * task["pairs"] + 1,), np.int32)
    tokens[..., 0:-1:2], tokens[..., 1:-1:2] = keys, task["keys"] + values
    tokens[..., -1] = keys[..., 0]  # the first pair's key is asked
    return jnp.asarray(tokens), jnp.asarray(values[..., 0], jnp.int32)


def test_chapter_10s_mamba2_step_and_evaluation_run_at_full_size_and_fit_a_t4():
    sizes = duality_chapter("gpu")
    task, seeds = sizes["TASK"], 3
    step, evaluation = estimate.duality_chapter_steps("gpu", models=("mamba2",), seeds=seeds)
    params, opt_state = step.run(*recall_batch(task, (seeds, sizes["BATCH"]), seed=0))
    assert all(np.isfinite(np.asarray(p)).all() for p in jax.tree.leaves(params))
    tokens, _ = recall_batch(task, (sizes["TEST"],), seed=1)
    predicted = np.asarray(evaluation.run(tokens))
    assert predicted.shape == (seeds, sizes["TEST"])
    assert predicted.min() >= 0 and predicted.max() < task["values"]
    # XLA's plan on this backend
    assert 0 < step.memory < T4_BYTES and 0 < evaluation.memory < T4_BYTES
    assert step.flops > 0 and step.bytes > 0
