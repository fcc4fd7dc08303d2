"""Training loop: parameter groups of the optimiser, learning on a tiny problem, budgets,
determinism, checkpoints, shape checks, the command line, and data parallelism on 4
simulated CPU devices (in a subprocess: XLA_FLAGS must be set before jax starts)."""

import importlib
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

from annotated_ssm.data import Dataset, load_dataset
from annotated_ssm.layers import LAYERS, SSMParam
from annotated_ssm.model import CausalSequenceModel, SequenceClassifier
from annotated_ssm.train import (TrainConfig, build_model, check_model_matches, count_params, evaluate, fit, main,
                                 make_optimizer, restore_checkpoint, save_checkpoint, ssm_labels)


def _first_layer():
    for name in ("s4d", "dss", "s5", "s4"):
        try:
            importlib.import_module(LAYERS[name][0])
            return name
        except ImportError:
            pass
    pytest.skip("no SSM layer written yet")


LAYER = _first_layer()
TINY = dict(d_model=16, n_layers=1, state_size=8, step_min=0.01, step_max=1.0)


@pytest.fixture(scope="module")
def tiny_data():
    full = load_dataset("digits")  # an easy problem: a tiny model learns it in a few steps
    return Dataset("digits", full.x_train[:240], full.y_train[:240], full.x_test[:60], full.y_test[:60],
                   "classification", 10)


def flat(state):
    return {path: np.asarray(v) for path, v in nnx.to_flat_state(nnx.as_pure(state))}


def test_ssm_labels_mark_exactly_the_ssm_parameters():
    model = SequenceClassifier(LAYER, 1, 10, rngs=nnx.Rngs(0), **TINY)
    params = nnx.as_pure(nnx.state(model, nnx.Param))
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
    config = TrainConfig(epochs=4, batch_size=20, lr=5e-2, progress=False)
    runs = []
    for _ in range(2):
        model = build_model(LAYER, tiny_data, seed=0, bidirectional=True, **TINY)
        runs.append(fit(model, tiny_data, config))
    history = runs[0]
    assert history.epoch == [1, 2, 3, 4] and history.steps == [12, 24, 36, 48]
    print("train loss per epoch:", np.round(history.train_loss, 3))
    assert all(np.diff(history.train_loss) < 0) and history.train_loss[-1] < 0.9 * history.train_loss[0]
    assert history.test_loss[-1] < history.test_loss[0]
    assert history.test_accuracy[-1] > 0.2  # chance is 0.1
    assert runs[1].train_loss == history.train_loss and runs[1].test_accuracy == history.test_accuracy
    final = evaluate(model, tiny_data.x_test, tiny_data.y_test, batch_size=7)  # padding-free answer
    assert final["accuracy"] == pytest.approx(history.test_accuracy[-1], abs=1e-9)
    assert final["loss"] == pytest.approx(history.test_loss[-1], rel=1e-5)


def test_step_and_time_budgets(tiny_data):
    model = build_model(LAYER, tiny_data, **TINY)
    history = fit(model, tiny_data, TrainConfig(epochs=5, batch_size=40, max_steps=8, progress=False))
    assert history.steps == [6, 8] and history.stopped == "step budget"
    history = fit(model, tiny_data, TrainConfig(epochs=5, batch_size=40, time_budget=0.0, progress=False))
    assert history.steps == [1] and history.stopped == "time budget"


def test_regression_training_and_checkpoint_restores_identical_predictions(tmp_path):
    ds = load_dataset("digits_ar")
    ds = Dataset(ds.name, ds.x_train[:200], ds.y_train[:200], ds.x_test[:50], ds.y_test[:50], ds.task)
    model = build_model(LAYER, ds, seed=0, norm="batch", **TINY)
    assert isinstance(model, CausalSequenceModel)
    config = TrainConfig(epochs=2, batch_size=50, progress=False)
    optimizer = make_optimizer(model, config, total_steps=8)
    history = fit(model, ds, config, optimizer=optimizer)
    assert history.test_loss[-1] < history.test_loss[0]
    expected = model(ds.x_test)
    save_checkpoint(tmp_path / "ckpt", model, optimizer)

    fresh = build_model(LAYER, ds, seed=1, norm="batch", **TINY)  # different weights
    fresh_optimizer = make_optimizer(fresh, config, total_steps=8)
    fresh.eval()
    assert not np.array_equal(fresh(ds.x_test), expected)
    restore_checkpoint(tmp_path / "ckpt", fresh, fresh_optimizer)
    fresh.eval()
    np.testing.assert_array_equal(fresh(ds.x_test), expected)  # identical, not just close
    assert int(fresh_optimizer.step[...]) == int(optimizer.step[...]) == 8
    for a, b in zip(jax.tree.leaves(nnx.state(fresh_optimizer)), jax.tree.leaves(nnx.state(optimizer))):
        np.testing.assert_array_equal(a, b)

    other = build_model(LAYER, ds, d_model=8, n_layers=1, state_size=8)
    with pytest.raises(ValueError, match="does not fit this model"):
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


def test_command_line(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--help"])
    assert exit_.value.code == 0
    help_text = capsys.readouterr().out
    assert "--layer" in help_text and "--dataset" in help_text and "mnist1d" in help_text
    with pytest.raises(SystemExit) as exit_:
        main(["--layer", "lstm"])
    assert exit_.value.code == 2
    assert "layer 'lstm'; choose one of: 's4', 'dss', 's4d', 's5'" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_:
        main(["--dataset", "imagenet"])
    assert "'mnist1d'" in capsys.readouterr().err
    assert main(["--layer", LAYER, "--dataset", "digits", "--d-model", "8", "--n-layers", "1", "--state-size", "4", "--step-max", "1",
                 "--max-steps", "3", "--no-progress"]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["steps"] == 3 and summary["stopped"] == "step budget" and 0 <= summary["test_accuracy"] <= 1
    with pytest.raises(SystemExit) as exit_:
        main(["--layer-option", "oops"])
    assert exit_.value.code == 2 and "KEY=VALUE; got 'oops'" in capsys.readouterr().err
    with pytest.raises(SystemExit):  # options reach the layer, which checks them
        main(["--layer", LAYER, "--dataset", "digits", "--layer-option", "no_such_option=1"])
    assert "no_such_option" in capsys.readouterr().err


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
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=4", JAX_PLATFORMS="cpu")
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
