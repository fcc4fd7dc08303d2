"""Variable lengths: a batch of sequences padded to one L with ``lengths`` gives, at every real
step, the pooled logits and the per-step outputs of each sequence alone; padded steps are zeros
and never change a real one (whatever they hold, BatchNorm's statistics included); the loss and
its gradient over a padded batch are those of the sequences alone; ``fit`` and ``evaluate``
train and score data sets with lengths, and so does the command line (an .npz file); a causal model returns each sequence's state at its
own end; bad lengths are refused by name."""

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from reference import message

from annotated_ssm.data import Dataset
from annotated_ssm.model import CausalSequenceModel, SequenceClassifier
from annotated_ssm.train import TrainConfig, _losses, evaluate, fit

L, LENGTHS = 12, np.array([12, 5, 9, 1], np.int32)
SIZES = dict(d_model=8, n_layers=2, state_size=4, step_min=0.01, step_max=1.0)


def padded_batch(seed=0, garbage=0.0):
    """(x (4, L, 2) with ``garbage`` after each length, y labels (4,), per-step targets)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((4, L, 2)).astype(np.float32)
    after = np.arange(L)[None, :, None] >= LENGTHS[:, None, None]
    x = np.where(after, garbage, x).astype(np.float32)
    return x, np.array([0, 1, 2, 1], np.int32), rng.standard_normal((4, L, 2)).astype(np.float32)


def classifier(layer, **options):
    model = SequenceClassifier(layer, 2, 3, rngs=nnx.Rngs(0), **{**SIZES, **options})
    model.eval()
    return model


CASES = [("s4d", dict(bidirectional=True)), ("s4d", dict(pooling="last")),
         ("s5", dict(bidirectional=True, norm="batch")), ("s6", dict(bidirectional=True)),
         ("ssd", dict(pooling="last"))]


@pytest.mark.parametrize("layer, options", CASES, ids=[f"{c[0]}-{'-'.join(map(str, c[1].values()))}"
                                                      for c in CASES])
def test_padding_is_ignored_and_each_sequence_is_as_alone(layer, options):
    model = classifier(layer, **options)
    x, _, _ = padded_batch()
    logits = np.asarray(model(x, LENGTHS))
    other = np.asarray(model(padded_batch(garbage=1e3)[0], LENGTHS))  # what padding holds
    np.testing.assert_array_equal(logits, other)
    for i, n in enumerate(LENGTHS):
        if options.get("norm") == "batch":  # batch statistics: the batch, not one sequence
            continue
        alone = np.asarray(model(x[i:i + 1, :n]))[0]
        np.testing.assert_allclose(logits[i], alone, rtol=1e-5, atol=1e-5 * np.abs(alone).max())


def test_a_causal_model_gives_zeros_at_padding_and_the_loss_of_each_sequence_alone():
    model = CausalSequenceModel("s4d", 2, 2, rngs=nnx.Rngs(1), **SIZES)
    model.eval()
    x, _, y = padded_batch()
    out = np.asarray(model(x, LENGTHS))
    assert np.all(out[3, 1:] == 0) and np.all(out[1, 5:] == 0)
    losses = np.asarray(_losses(model, x, y, "regression", LENGTHS)[0])
    for i, n in enumerate(LENGTHS):
        alone = np.asarray(_losses(model, x[i:i + 1, :n], y[i:i + 1, :n], "regression")[0])[0]
        np.testing.assert_allclose(losses[i], alone, rtol=1e-5)


@pytest.mark.parametrize("layer", ["s4", "s5", "s6", "ssd"])
def test_each_sequence_s_final_state_is_the_state_at_its_own_end(layer):
    """A batch of prompts of different lengths prefilled at once: the outputs of the call
    without a state, and each sequence's state after its own last step."""
    model = CausalSequenceModel(layer, 2, 2, rngs=nnx.Rngs(2), **SIZES)
    x, _, _ = padded_batch(garbage=1e3)
    y, final = model(x, LENGTHS, return_state=True)
    plain = np.asarray(model(x, LENGTHS))
    np.testing.assert_allclose(y, plain, rtol=1e-5, atol=1e-5 * np.abs(plain).max())
    for i, n in enumerate(LENGTHS):
        _, alone = model(x[i:i + 1, :n], return_state=True)
        for got, want in zip(jax.tree.leaves(final), jax.tree.leaves(alone)):
            np.testing.assert_allclose(got[i], want[0], rtol=1e-5,
                                       atol=1e-5 * np.abs(want).max())
    with pytest.raises(ValueError, match=message("state", "None with lengths")):
        model(x, LENGTHS, state=final)


@pytest.mark.parametrize("layer", ["s4d", "s6"])
def test_the_gradient_over_a_padded_batch_is_the_sum_over_the_sequences_alone(layer):
    model = classifier(layer, bidirectional=True)
    x, labels, _ = padded_batch()

    def total(model, pieces):
        return sum(_losses(model, *piece, "classification")[0].sum() for piece in pieces)

    padded = nnx.grad(lambda m: _losses(m, x, labels, "classification", LENGTHS)[0].sum())(model)
    alone = nnx.grad(lambda m: total(m, [(x[i:i + 1, :n], labels[i:i + 1])
                                         for i, n in enumerate(LENGTHS)]))(model)
    for a, b in zip(jax.tree.leaves(padded), jax.tree.leaves(alone), strict=True):
        scale = float(jnp.max(jnp.abs(b))) or 1.0
        assert float(jnp.max(jnp.abs(a - b))) <= 1e-5 * scale


def test_fit_and_evaluate_train_on_a_data_set_with_lengths():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((60, L, 1)).astype(np.float32)
    lengths = rng.integers(3, L + 1, 60).astype(np.int32)
    x[np.arange(L)[None, :] >= lengths[:, None]] = 0.0
    y = (np.array([x[i, :n, 0].mean() for i, n in enumerate(lengths)]) > 0).astype(np.int32)
    data = Dataset("signs", x[:50], y[:50], x[50:], y[50:], "classification", 2,
                   lengths_train=lengths[:50], lengths_test=lengths[50:])
    model = SequenceClassifier("s4d", 1, 2, rngs=nnx.Rngs(0), **SIZES)
    history = fit(model, data, TrainConfig(epochs=3, batch_size=10, lr=2e-2, progress=False))
    assert history.train_loss[-1] < history.train_loss[0]
    scored = evaluate(model, data.x_test, data.y_test, lengths=data.lengths_test)
    assert scored["accuracy"] == history.test_accuracy


@pytest.mark.parametrize("lengths, named", [
    (np.array([3, 0]), message("lengths_train", "[1, 12]", "0 at index 1")),
    (np.array([3, 13]), message("lengths_train", "13 at index 1")),
    (np.array([3.0, 4.0]), message("lengths_train", "float64")),
    (np.array([3]), message("lengths_train", "(2,)", "(1,)")),
])
def test_bad_lengths_are_refused_by_name(lengths, named):
    x = np.zeros((2, L, 1), np.float32)
    with pytest.raises(ValueError, match=named):
        Dataset("d", x, np.array([0, 1]), x, np.array([0, 1]), "classification", 2,
                lengths_train=lengths)
    with pytest.raises(ValueError, match=message("lengths")):
        classifier("s4d")(np.zeros((2, L, 2), np.float32), lengths)


def test_the_cli_trains_and_resumes_on_an_npz_file_with_lengths(tmp_path, capsys):
    """Your own data set with lengths through the command line: trained, saved, resumed and
    extended (the file's path is stored with the run); a file without its arrays is refused
    by name."""
    from annotated_ssm.cli import main
    from annotated_ssm.data import load_npz

    x, y, _ = padded_batch()
    arrays = dict(x_train=np.tile(x, (5, 1, 1)), y_train=np.tile(y, 5), x_test=x, y_test=y,
                  lengths_train=np.tile(LENGTHS, 5), lengths_test=LENGTHS)
    np.savez(tmp_path / "mine.npz", **arrays)
    data = load_npz(tmp_path / "mine.npz")
    assert data.n_classes == 3 and np.array_equal(data.lengths_test, LENGTHS)
    common = ["--layer", "s4d", "--d-model", "8", "--n-layers", "1", "--batch-size", "10",
              "--json"]
    assert main(["--dataset", str(tmp_path / "mine.npz"), "--epochs", "1", *common,
                 "--checkpoint", str(tmp_path / "run")]) == 0
    assert main(["--resume", str(tmp_path / "run"), "--epochs", "2", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["dataset"] == str(tmp_path / "mine.npz") and summary["epochs"] == 2

    np.savez(tmp_path / "partial.npz", **{k: v for k, v in arrays.items() if k != "y_test"})
    with pytest.raises(ValueError, match=message("partial.npz", "missing ['y_test']")):
        load_npz(tmp_path / "partial.npz")
    np.savez(tmp_path / "floats.npz", **{**arrays, "y_train": arrays["y_train"] * 1.0})
    with pytest.raises(ValueError, match=message("floats.npz", "y_train", "float64")):
        load_npz(tmp_path / "floats.npz")
    np.savez(tmp_path / "no_labels.npz", x_train=arrays["x_train"])
    with pytest.raises(SystemExit) as refused:  # one line, status 2: not a bare KeyError
        main(["--dataset", str(tmp_path / "no_labels.npz"), *common])
    assert refused.value.code == 2 and "no_labels.npz' must be a NumPy .npz file holding" in \
        capsys.readouterr().err
