"""Training loop: parameter groups of the optimiser, learning on a tiny problem, the step
budget, the validation split and model selection, one test evaluation, divergence,
resuming, several seeds, determinism, shape checks, and data parallelism on 4 simulated
CPU devices (in a subprocess: XLA_FLAGS must be set before jax starts). Checkpoints:
test_checkpoint.py; the command line: test_cli.py."""

import dataclasses
import json
import os
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from annotated_ssm import train
from annotated_ssm.data import Dataset, load_dataset, validation_split
from annotated_ssm.layers import SSMParam
from annotated_ssm.model import CausalSequenceModel, SequenceClassifier
from annotated_ssm.checkpoint import load_model, restore_checkpoint, save_checkpoint
from annotated_ssm.config import ModelConfig, TrainConfig
from annotated_ssm.train import (DivergedError, build_model, check_model_matches, count_params, count_steps,
                                 evaluate, fit, fit_seeds, make_optimizer, ssm_labels)


LAYER = "s4d"
TINY = dict(d_model=16, n_layers=1, state_size=8, step_min=0.01, step_max=1.0)
pytestmark = pytest.mark.usefixtures("frozen_heap")  # tests/conftest.py: saves collect garbage


@pytest.fixture(scope="module")
def tiny_data():
    full = load_dataset("digits")  # an easy problem: a tiny model learns it in a few steps
    return Dataset("digits", full.x_train[:240], full.y_train[:240], full.x_test[:60], full.y_test[:60],
                   "classification", 10)


def as_pure(state):
    """The state with plain arrays in place of Variables (``nnx.as_pure`` on flax >= 0.12.1;
    the same by hand on the oldest flax that pyproject.toml allows)."""
    if hasattr(nnx, "as_pure"):
        return nnx.as_pure(state)
    is_variable = lambda x: isinstance(x, nnx.Variable)  # noqa: E731
    return jax.tree.map(lambda v: v.value if is_variable(v) else v, state, is_leaf=is_variable)


def flat(state):
    return {path: np.asarray(v) for path, v in nnx.to_flat_state(as_pure(state))}


def test_ssm_labels_mark_exactly_the_ssm_parameters():
    model = SequenceClassifier(LAYER, 1, 10, rngs=nnx.Rngs(0), **TINY)
    params = as_pure(nnx.state(model, nnx.Param))
    labels = ssm_labels(model)(params)
    flat_labels = {p: v for p, v in nnx.to_flat_state(labels)}
    ssm = {p for p, _ in nnx.to_flat_state(nnx.state(model, SSMParam))}
    assert ssm and {p for p, v in flat_labels.items() if v == "ssm"} == ssm
    assert all(("ssm" in p) for p in ssm)  # only inside the SSM layers


def test_ssm_parameters_get_no_weight_decay_and_their_own_learning_rate():
    model = SequenceClassifier(LAYER, 1, 10, rngs=nnx.Rngs(0), **TINY)
    before_ssm, before_all = flat(nnx.state(model, SSMParam)), flat(nnx.state(model, nnx.Param))
    config = TrainConfig(lr=0.1, ssm_lr=0.01, weight_decay=0.5, warmup_fraction=0.0)
    optimizer = make_optimizer(model, config, total_steps=10)
    zero = jax.tree.map(jnp.zeros_like, nnx.state(model, nnx.Param))
    optimizer.update(model, zero)
    after_all = flat(nnx.state(model, nnx.Param))
    for path, value in after_all.items():
        if path in before_ssm:  # Adam with zero gradient: no change at all
            np.testing.assert_array_equal(value, before_all[path])
        else:  # AdamW with zero gradient: pure decay p <- p (1 - lr wd)
            np.testing.assert_allclose(value, before_all[path] * (1 - 0.1 * 0.5), rtol=1e-6, atol=1e-7)
    # separate learning rates: ssm_lr = 0 freezes exactly the SSM parameters
    model = SequenceClassifier(LAYER, 1, 10, rngs=nnx.Rngs(0), **TINY)
    optimizer = make_optimizer(model, TrainConfig(lr=0.01, ssm_lr=0.0, weight_decay=0.0, warmup_fraction=0.0), 10)
    grads = jax.tree.map(jnp.ones_like, nnx.state(model, nnx.Param))
    optimizer.update(model, grads)
    after_all = flat(nnx.state(model, nnx.Param))
    for path, value in after_all.items():
        if path in before_ssm:
            np.testing.assert_array_equal(value, before_all[path])
        else:  # first Adam step with gradient 1 moves every entry by lr
            np.testing.assert_allclose(value, before_all[path] - 0.01, rtol=1e-5, atol=1e-6)


def test_loss_goes_down_and_runs_are_reproducible(tiny_data):
    config = TrainConfig(epochs=4, batch_size=20, lr=5e-2, validation_fraction=0.0, progress=False)
    runs = []
    for _ in range(2):
        model = build_model(LAYER, tiny_data, seed=0, bidirectional=True, **TINY)
        runs.append(fit(model, tiny_data, config))
    history = runs[0]
    assert history.epoch == [1, 2, 3, 4] and history.steps == [12, 24, 36, 48] and history.best_epoch == 4
    print("train loss per epoch:", np.round(history.train_loss, 3))
    assert all(np.diff(history.train_loss) < 0) and history.train_loss[-1] < 0.9 * history.train_loss[0]
    assert np.all(np.isnan(history.val_loss))  # no validation split
    assert history.test_accuracy > 0.2  # chance is 0.1
    assert runs[1].train_loss == history.train_loss and runs[1].test_accuracy == history.test_accuracy
    final = evaluate(model, tiny_data.x_test, tiny_data.y_test, batch_size=7)  # padding-free answer
    assert final["accuracy"] == pytest.approx(history.test_accuracy, abs=1e-9)
    assert final["loss"] == pytest.approx(history.test_loss, rel=1e-5)


def test_dropout_is_on_in_every_training_step_and_off_afterwards(tiny_data):
    # fit trains in train mode (dropout on) whatever mode the model arrives in and whatever
    # `evaluate` does between epochs, and hands the model back in eval mode.
    config = TrainConfig(epochs=2, batch_size=20, validation_fraction=0.25, progress=False)
    histories = {}
    for mode in ("train", "eval"):
        model = build_model(LAYER, tiny_data, seed=0, dropout=0.3, **TINY)
        getattr(model, mode)()
        histories[mode] = fit(model, tiny_data, config)
    without = fit(build_model(LAYER, tiny_data, seed=0, **TINY), tiny_data, config)
    assert histories["eval"].train_loss == histories["train"].train_loss
    assert histories["train"].train_loss[1] != without.train_loss[1]  # dropout was on
    x = jnp.asarray(tiny_data.x_test[:5])
    assert np.array_equal(model(x), model(x))  # eval mode: no dropout


def test_validation_selects_the_best_epoch_and_the_test_set_is_evaluated_once(tiny_data, monkeypatch):
    calls = []
    real_evaluate = train.evaluate

    def counting_evaluate(model, x, y, **kwargs):
        calls.append("test" if x is tiny_data.x_test else "validation")
        return real_evaluate(model, x, y, **kwargs)

    monkeypatch.setattr(train, "evaluate", counting_evaluate)
    config = TrainConfig(epochs=5, batch_size=20, lr=5e-2, validation_fraction=0.25, seed=3, progress=False)
    assert count_steps(config, tiny_data) == 5 * (180 // 20)  # 60 of the 240 held out
    model = build_model(LAYER, tiny_data, seed=0, bidirectional=True, **TINY)
    history = fit(model, tiny_data, config)
    assert calls == ["validation"] * 5 + ["test"]
    assert history.steps == [9, 18, 27, 36, 45] and len(history.val_accuracy) == 5
    best = int(np.argmax(history.val_accuracy))  # the first of equal scores
    assert history.best_epoch == best + 1
    # the model holds the best epoch's weights: its validation accuracy is that epoch's
    _, _, x_val, y_val = validation_split(tiny_data.x_train, tiny_data.y_train, 0.25, seed=3)
    assert len(x_val) == 60
    again = real_evaluate(model, x_val, y_val)
    assert again["accuracy"] == history.val_accuracy[best] and again["loss"] == pytest.approx(history.val_loss[best])
    test = real_evaluate(model, tiny_data.x_test, tiny_data.y_test)
    assert test["accuracy"] == history.test_accuracy


def test_step_budget_ends_the_schedule_and_the_run(tiny_data):
    model = build_model(LAYER, tiny_data, **TINY)
    config = TrainConfig(epochs=5, batch_size=40, max_steps=8, validation_fraction=0.0, warmup_fraction=0.0,
                         progress=False)
    assert count_steps(config, tiny_data) == 8
    history = fit(model, tiny_data, config)
    assert history.steps == [6, 8] and history.stopped == "step budget"
    # the cosine schedule spans exactly the budget: the step after the last would have lr 0
    optimizer = make_optimizer(model, config, count_steps(config, tiny_data))
    schedule_end = optax_lr_after(optimizer, model, steps=8)
    assert schedule_end == pytest.approx(0.0, abs=1e-12)
    with pytest.raises(ValueError, match="max_steps must be an integer >= 1; got 0"):
        TrainConfig(max_steps=0)


def optax_lr_after(optimizer, model, steps):
    """The learning rate the default parameter group would use after ``steps`` updates,
    measured: a zero gradient moves an AdamW parameter only by decay, lr * wd * p."""
    zero_step = nnx.jit(lambda optimizer, model: optimizer.update(
        model, jax.tree.map(jnp.zeros_like, nnx.state(model, nnx.Param))))
    for _ in range(steps):
        zero_step(optimizer, model)
    before = flat(nnx.state(model, nnx.Param))
    zero_step(optimizer, model)
    after = flat(nnx.state(model, nnx.Param))
    return max(float(np.max(np.abs(after[p] - before[p]))) for p in after)


def test_a_nan_loss_stops_training_and_names_the_step(tiny_data):
    # Non-finite data is refused before training (tests/test_hostile_training.py); a learning
    # rate of 1e30 makes the weights huge after one step, so the second step's loss is NaN.
    config = TrainConfig(epochs=2, batch_size=20, lr=1e30, warmup_fraction=0.0, validation_fraction=0.0,
                         progress=False)
    model = build_model(LAYER, tiny_data, **TINY)
    with pytest.raises(DivergedError, match="the training loss became nan at update 2 "
                                            "\\(epoch 1\\)") as error:
        fit(model, tiny_data, config)
    assert error.value.step == 2 and error.value.history.epoch == []


def test_resuming_from_a_checkpoint_repeats_the_uninterrupted_run(tiny_data, tmp_path):
    config = TrainConfig(epochs=3, batch_size=40, lr=2e-2, validation_fraction=0.0, progress=False)
    whole = build_model(LAYER, tiny_data, seed=0, **TINY)
    fit(whole, tiny_data, config)

    model = build_model(LAYER, tiny_data, seed=0, **TINY)
    optimizer = make_optimizer(model, config, count_steps(config, tiny_data))
    fit(model, tiny_data, dataclasses.replace(config, max_steps=8), optimizer=optimizer)  # stops mid-epoch 2
    save_checkpoint(tmp_path / "half", model, optimizer, config=config)

    resumed = load_model(tmp_path / "half")
    resumed_optimizer = make_optimizer(resumed, config, count_steps(config, tiny_data))
    info = restore_checkpoint(tmp_path / "half", resumed, resumed_optimizer)
    assert info["step"] == 8 and info["train_config"]["epochs"] == 3
    history = fit(resumed, tiny_data, config, optimizer=resumed_optimizer)
    assert history.epoch == [2, 3] and history.steps == [12, 18]
    for path, value in flat(nnx.state(whole, nnx.Param)).items():
        np.testing.assert_allclose(flat(nnx.state(resumed, nnx.Param))[path], value, rtol=1e-6, atol=1e-7)
    with pytest.raises(ValueError, match="already at update 18.*budget \\(18 updates\\)"):
        fit(resumed, tiny_data, config, optimizer=resumed_optimizer)


def test_fit_seeds_reports_every_seed_and_mean_and_std(tiny_data):
    model_config = ModelConfig(layer=LAYER, bidirectional=True, **TINY)
    config = TrainConfig(epochs=1, batch_size=40, lr=5e-2, progress=False)
    results = fit_seeds(model_config, tiny_data, config, seeds=(0, 1))
    accuracy = results.test_accuracy
    assert results.seeds == [0, 1] and accuracy.shape == (2,) and np.all((0 <= accuracy) & (accuracy <= 1))
    assert results.n_params == count_params(build_model(model_config, tiny_data))
    summary = results.summary()
    assert summary["mean"] == pytest.approx(np.mean(accuracy))
    assert summary["std"] == pytest.approx(np.std(accuracy, ddof=1))
    assert summary["per_seed"] == {s: float(a) for s, a in zip((0, 1), accuracy)}
    assert str(results).startswith(f"{100 * np.mean(accuracy):.1f} ± "
                                   f"{100 * np.std(accuracy, ddof=1):.1f} %")
    single = fit(build_model(model_config, tiny_data, seed=1), tiny_data, dataclasses.replace(config, seed=1))
    assert single.test_accuracy == accuracy[1]  # seed s of fit_seeds is the run with seed s
    with pytest.raises(ValueError, match="distinct"):
        fit_seeds(model_config, tiny_data, config, seeds=(1, 1))


def test_configs_reject_bad_values_naming_the_field():
    for kwargs, message in ((dict(lr=float("nan")), "lr must be a finite number"),
                            (dict(warmup_fraction=5.0), r"warmup_fraction must be a finite number in \[0.0, 1.0\)"),
                            (dict(epochs=0), "epochs must be an integer >= 1; got 0"),
                            (dict(validation_fraction=1.0), "validation_fraction"),
                            (dict(seed=-1), r"seed must be an integer in \[0, 4294967295\]; got -1"),
                            (dict(batch_size=2.5), "batch_size must be an integer")):
        with pytest.raises(ValueError, match=message):
            TrainConfig(**kwargs)
    for kwargs, message in ((dict(layer="lstm"), "layer 'lstm'; choose one of"),
                            (dict(dropout=1.0), "dropout"),
                            (dict(step_min=0.5, step_max=0.1), "step_min must be <= step_max"),
                            (dict(step_min=float("inf")), "step_min must be a real number > 0, finite"),
                            (dict(step_max=1e-5), r"step_min must be <= step_max; got step_min=0.001"),
                            (dict(layer_options={"state_size": 3}), "may not set")):
        with pytest.raises(ValueError, match=message):
            ModelConfig(**kwargs)
    with pytest.raises(ValueError, match="bidirectional=True does not apply to a regression"):
        ModelConfig(bidirectional=True).check_task("regression")
    # NumPy scalars are stored as the Python values JSON can write into a checkpoint
    config = TrainConfig(epochs=np.int64(3), lr=np.float32(0.5), keep_best=np.bool_(False))
    assert [type(v) for v in (config.epochs, config.lr, config.keep_best)] == [int, float, bool]
    assert type(ModelConfig(d_model=np.int32(8)).d_model) is int


def test_regression_training_and_checkpoint_restores_identical_predictions(tmp_path):
    ds = load_dataset("digits_ar")
    ds = Dataset(ds.name, ds.x_train[:200], ds.y_train[:200], ds.x_test[:50], ds.y_test[:50], ds.task)
    model = build_model(LAYER, ds, seed=0, norm="batch", **TINY)
    assert isinstance(model, CausalSequenceModel)
    config = TrainConfig(epochs=2, batch_size=45, progress=False)
    optimizer = make_optimizer(model, config, total_steps=8)
    history = fit(model, ds, config, optimizer=optimizer)
    assert np.isfinite(history.test_loss) and np.isnan(history.test_accuracy) and len(history.val_loss) == 2
    assert history.best_epoch == 1 + int(np.argmin(history.val_loss))  # regression: lowest validation loss
    expected = model(ds.x_test)
    if history.best_epoch != 2:  # the model holds epoch 1's weights, the optimiser is at epoch 2's end
        with pytest.raises(ValueError, match="holds the best epoch's weights"):
            save_checkpoint(tmp_path / "ckpt", model, optimizer)
        optimizer = make_optimizer(model, config, total_steps=8)  # a consistent pair, to test the round trip
    save_checkpoint(tmp_path / "ckpt", model, optimizer)

    fresh = build_model(LAYER, ds, seed=1, norm="batch", **TINY)  # different weights
    fresh_optimizer = make_optimizer(fresh, config, total_steps=8)
    fresh.eval()
    assert not np.array_equal(fresh(ds.x_test), expected)
    restore_checkpoint(tmp_path / "ckpt", fresh, fresh_optimizer)
    fresh.eval()
    np.testing.assert_array_equal(fresh(ds.x_test), expected)  # identical, not just close
    assert int(fresh_optimizer.step[...]) == int(optimizer.step[...]) == (
        8 if history.best_epoch == 2 else 0)
    for a, b in zip(jax.tree.leaves(nnx.state(fresh_optimizer)), jax.tree.leaves(nnx.state(optimizer))):
        np.testing.assert_array_equal(a, b)

    other = build_model(LAYER, ds, d_model=8, n_layers=1, state_size=8)
    with pytest.raises(ValueError, match="does not fit this model .*d_model: checkpoint 16, "
                                         "model 8"):
        restore_checkpoint(tmp_path / "ckpt", other)


def test_shape_mismatches_are_caught_before_training(tiny_data):
    wrong_channels = SequenceClassifier(LAYER, 3, 10, rngs=nnx.Rngs(0), **TINY)
    with pytest.raises(ValueError, match=r"d_input=3 .* has 1 \(x_train shape \(240, 64, 1\)\).*d_input=1"):
        fit(wrong_channels, tiny_data)
    wrong_classes = SequenceClassifier(LAYER, 1, 4, rngs=nnx.Rngs(0), **TINY)
    with pytest.raises(ValueError, match="n_classes=4 .* 10 classes"):
        check_model_matches(wrong_classes, tiny_data)
    regression = CausalSequenceModel(LAYER, 1, 1, rngs=nnx.Rngs(0), **TINY)
    with pytest.raises(ValueError, match="classification task, so it needs a SequenceClassifier"):
        check_model_matches(regression, tiny_data)
    model = build_model(LAYER, tiny_data, **TINY)
    with pytest.raises(ValueError, match="batch_size must be <= the number of training samples"):
        fit(model, tiny_data, TrainConfig(batch_size=1000, progress=False))
    assert count_params(model) > 0
    with pytest.raises(ValueError, match="either a ModelConfig or keyword arguments"):
        build_model(ModelConfig(layer=LAYER), tiny_data, d_model=8)


SHARDED = textwrap.dedent("""
    import json, sys
    import jax, numpy as np
    from flax import nnx
    from annotated_ssm.data import load_dataset
    from annotated_ssm.train import TrainConfig, build_model, evaluate, fit, make_mesh
    assert len(jax.devices()) == 4, jax.devices()
    data = load_dataset("mnist1d", num_samples=300)
    config = TrainConfig(epochs=1, batch_size=40, max_steps=3, progress=False)
    results = {}
    for name, devices in (("one", jax.devices()[:1]), ("four", jax.devices())):
        model = build_model(sys.argv[1], data, seed=0, norm="batch", **json.loads(sys.argv[2]))
        mesh = make_mesh(devices)
        history = fit(model, data, config, mesh=mesh)
        leaf = jax.tree.leaves(nnx.state(model, nnx.Param))[0]
        odd = evaluate(model, data.x_test, data.y_test, batch_size=7, mesh=mesh)  # 7: padded to 8
        results[name] = dict(devices=len(leaf.sharding.device_set), loss=history.train_loss, test=history.test_loss,
                             odd=odd["loss"], params=[float(np.sum(np.abs(p))) for p in jax.tree.leaves(nnx.state(model, nnx.Param))])
    try:
        fit(build_model(sys.argv[1], data, **json.loads(sys.argv[2])), data, TrainConfig(batch_size=30, progress=False))
    except ValueError as error:
        results["error"] = str(error)
    print(json.dumps(results))
""")


def test_data_parallel_step_on_four_simulated_devices_matches_one_device():
    # Compiled with little optimisation, as in this process (tests/conftest.py).
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=4", JAX_PLATFORMS="cpu",
               JAX_DISABLE_MOST_OPTIMIZATIONS="1")
    done = subprocess.run([sys.executable, "-c", SHARDED, LAYER, json.dumps(TINY)], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(done.stdout.strip().splitlines()[-1])
    one, four = results["one"], results["four"]
    assert one["devices"] == 1 and four["devices"] == 4  # parameters replicated on all four
    print(f"loss on 1 device {one['loss'][0]:.7f}, on 4 devices {four['loss'][0]:.7f}")
    np.testing.assert_allclose(four["loss"], one["loss"], rtol=1e-5)
    np.testing.assert_allclose(four["test"], one["test"], rtol=1e-5)
    np.testing.assert_allclose(four["odd"], one["odd"], rtol=1e-5)
    np.testing.assert_allclose(four["params"], one["params"], rtol=1e-5)
    assert "batch_size must be divisible by the number of devices (4)" in results["error"]


def test_a_run_without_test_never_evaluates_the_test_set(tiny_data, monkeypatch):
    # Choosing hyper-parameters on validation: fit(test=False) does not look at the test set.
    is_test, real_evaluate = [], train.evaluate

    def evaluate(model, x, y, **kwargs):
        is_test.append(x is tiny_data.x_test)
        return real_evaluate(model, x, y, **kwargs)

    monkeypatch.setattr(train, "evaluate", evaluate)
    model = build_model(LAYER, tiny_data, **TINY)
    history = fit(model, tiny_data, TrainConfig(epochs=1, batch_size=40, progress=False), test=False)
    assert is_test and not any(is_test)  # validation evaluated, the test set never
    assert np.isnan(history.test_accuracy) and not np.isnan(history.val_accuracy[-1])
    with pytest.raises(ValueError, match="test must be True or False; got 'no'"):
        fit(model, tiny_data, TrainConfig(epochs=1, progress=False), test="no")


def test_s4_is_built_for_the_data_length_unless_told(tiny_data, tmp_path):
    """build_model gives S4 the data's length as its reference length L₀ (the official S4's
    l_max), keeps one the options set, adds nothing to layers without one, and a checkpoint
    rebuilds the same layer."""
    model = build_model("s4", tiny_data, d_model=4, n_layers=1, state_size=4)
    assert model.blocks[0].ssm.kernel_length == tiny_data.length
    assert model.architecture["layer_options"] == {"kernel_length": tiny_data.length}
    told = build_model(ModelConfig(layer="s4", d_model=4, n_layers=1, state_size=4,
                                   layer_options={"kernel_length": 128}), tiny_data)
    assert told.blocks[0].ssm.kernel_length == 128
    s4d = build_model("s4d", tiny_data, d_model=4, n_layers=1, state_size=4)
    assert s4d.architecture["layer_options"] == {}
    save_checkpoint(tmp_path / "s4", model)
    loaded = load_model(tmp_path / "s4")
    assert loaded.blocks[0].ssm.kernel_length == tiny_data.length
    x = tiny_data.x_test[:2]
    np.testing.assert_array_equal(np.asarray(loaded(x)), np.asarray(model(x)))
