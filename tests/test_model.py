"""Models: shapes of every variant with every layer, causality, the recurrent form and
generation against the full-sequence (convolution / scan) form, and input errors."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from reference import message, relative_error

from annotated_ssm.layers import LAYERS
from annotated_ssm.model import CausalSequenceModel, ResidualBlock, SequenceClassifier


layer_names = pytest.mark.parametrize("layer", list(LAYERS))

SMALL = dict(d_model=8, n_layers=2, state_size=4)


def inputs(shape, seed=1):
    return jax.random.normal(jax.random.key(seed), shape, jnp.float32)



@pytest.mark.parametrize("layer,pooling,bidirectional",
                         [(name, "mean", True) for name in LAYERS] + [("s4d", "last", False)])
def test_classifier_shapes(layer, pooling, bidirectional):
    """Every layer in the model; the other pooling is the model's own code (one layer)."""
    model = SequenceClassifier(layer, 3, 5, pooling=pooling, bidirectional=bidirectional, rngs=nnx.Rngs(0), **SMALL)
    x = inputs((4, 12, 3))
    logits = model(x)
    assert logits.shape == (4, 5) and logits.dtype == jnp.float32
    assert bool(jnp.all(jnp.isfinite(logits)))
    # an unbatched sequence gives the same answer as in a batch
    np.testing.assert_allclose(model(x[1]), logits[1], rtol=1e-5, atol=1e-6)


def test_bidirectional_classifier_sees_the_future_causal_one_does_not():
    """The model's own wiring (encoder, norms, mixing act per time step); each layer's
    causality is checked in test_layer_contract.py."""
    layer = "s4d"
    x = inputs((2, 10, 1))
    x_changed = x.at[:, 5:].add(1.0)
    for bidirectional in (False, True):
        model = SequenceClassifier(layer, 1, 3, bidirectional=bidirectional, rngs=nnx.Rngs(0), **SMALL)
        features = model.features(x)
        changed = model.features(x_changed)
        past_moved = float(jnp.max(jnp.abs(features[:, :5] - changed[:, :5])))
        if bidirectional:
            assert past_moved > 1e-3
        else:
            assert past_moved < 1e-5, past_moved


@layer_names
def test_causal_model_recurrent_equals_full_sequence(layer):
    """Layer norm and GLU; BatchNorm without GLU: test_batch_norm_model_steps_and_generates."""
    model = CausalSequenceModel(layer, 2, 3, norm="layer", glu=True, rngs=nnx.Rngs(0), **SMALL)
    x = inputs((3, 16, 2))
    model.eval()
    y = model(x)
    assert y.shape == (3, 16, 3)
    err = relative_error(model.recurrent(x), y)
    print(f"{layer}: max |recurrent - full| / max |full| = {err:.1e}")
    assert err < 2e-5


@layer_names
def test_generation_reproduces_full_sequence_output(layer):
    model = CausalSequenceModel(layer, 1, 1, rngs=nnx.Rngs(2), **SMALL)
    model.eval()
    prompt = inputs((2, 6, 1))
    out = model.generate(prompt, 10)
    assert out.shape == (2, 6 + 10 - 1, 1)
    # The generated continuation, fed to the convolutional form as ordinary input, must give
    # back exactly what the recurrence produced at every step.
    continuation = out[:, 5:-1]
    full_input = jnp.concatenate([prompt, continuation], axis=1)
    err = relative_error(model(full_input), out)
    print(f"{layer}: max |generate - full| / max |full| = {err:.1e}")
    assert err < 2e-5
    assert float(jnp.max(jnp.abs(out[:, 5:] - out[:, 5:6]))) > 1e-4  # it does not just repeat itself


@layer_names
def test_batch_norm_model_steps_and_generates_in_train_mode(layer):
    """A fresh model is in train mode; its recurrence must not raise Flax's TraceContextError
    (BatchNorm updating its statistics, dropout drawing keys, inside a scan). The recurrence
    is inference: running statistics, no dropout, in either mode, and it changes nothing."""
    model = CausalSequenceModel(layer, 1, 1, norm="batch", glu=False, dropout=0.2, rngs=nnx.Rngs(0), **SMALL)
    x = inputs((2, 12, 1), seed=2)
    model(x)  # in train mode: BatchNorm's running statistics move away from their start
    variables = (nnx.Param, nnx.BatchStat, nnx.RngCount)  # weights, statistics, dropout's counts
    before = jax.tree.map(np.asarray, nnx.state(model, variables))
    y_rec = model.recurrent(x)
    y_gen = model.generate(x[:, :5], 4)
    assert y_rec.shape == (2, 12, 1) and y_gen.shape == (2, 8, 1)
    after = jax.tree.map(np.asarray, nnx.state(model, variables))
    assert all(np.array_equal(a, b) for a, b in zip(jax.tree.leaves(before), jax.tree.leaves(after)))
    model.eval()  # eval mode: the full-sequence call uses the same statistics
    assert relative_error(y_rec, model(x)) < 1e-5
    assert relative_error(model.recurrent(x), y_rec) < 1e-6
    assert relative_error(model.generate(x[:, :5], 4), y_gen) < 1e-6


@layer_names
def test_residual_block_is_identity_plus_update(layer):
    block = ResidualBlock(layer, 8, 4, rngs=nnx.Rngs(0))
    x = inputs((2, 7, 8))
    y = block(x)
    assert y.shape == x.shape
    # zeroing the output mixing leaves only the residual path
    block.mix.kernel[...] = jnp.zeros_like(block.mix.kernel[...])
    block.mix.bias[...] = jnp.zeros_like(block.mix.bias[...])
    np.testing.assert_array_equal(block(x), x)


def test_dropout_only_in_training_mode():
    layer = "s4d"
    model = SequenceClassifier(layer, 1, 3, dropout=0.5, rngs=nnx.Rngs(0), **SMALL)
    x = inputs((2, 10, 1))
    model.eval()
    np.testing.assert_array_equal(model(x), model(x))
    model.train()
    assert float(jnp.max(jnp.abs(model(x) - model(x)))) > 1e-4


def test_errors_name_the_argument_and_the_value():
    layer = "s4d"
    with pytest.raises(ValueError, match=message("layer", "lstm")):
        SequenceClassifier("lstm", 1, 10, rngs=nnx.Rngs(0))
    with pytest.raises(ValueError, match=message("pooling", "max")):
        SequenceClassifier(layer, 1, 10, pooling="max", rngs=nnx.Rngs(0), **SMALL)
    with pytest.raises(ValueError, match=message("norm", "group")):
        SequenceClassifier(layer, 1, 10, norm="group", rngs=nnx.Rngs(0), **SMALL)
    with pytest.raises(ValueError, match=message("dropout", 1.0)):
        SequenceClassifier(layer, 1, 10, dropout=1.0, rngs=nnx.Rngs(0), **SMALL)
    with pytest.raises(ValueError, match=message("n_classes", 1)):
        SequenceClassifier(layer, 1, 1, rngs=nnx.Rngs(0), **SMALL)
    with pytest.raises(ValueError, match=message("bidirectional", "False")):
        CausalSequenceModel(layer, 1, 1, bidirectional=True, rngs=nnx.Rngs(0), **SMALL)
    model = CausalSequenceModel(layer, 2, 1, rngs=nnx.Rngs(0), **SMALL)
    with pytest.raises(ValueError, match=message("x", "2 channels", (4, 10, 3))):
        model(jnp.zeros((4, 10, 3)))
    with pytest.raises(ValueError, match=message("x", "dimensions", (10,))):
        model(jnp.zeros((10,)))
    with pytest.raises(ValueError, match=message("d_output", "d_input")):
        model.generate(jnp.zeros((1, 3, 2)), 4)
    square = CausalSequenceModel(layer, 1, 1, rngs=nnx.Rngs(0), **SMALL)
    with pytest.raises(ValueError, match=message("n_steps", 0)):
        square.generate(jnp.zeros((1, 3, 1)), 0)
    # Hostile inputs an adversarial run found: an empty prompt (was: IndexError), an empty
    # sequence, a state for another batch shape.
    with pytest.raises(ValueError, match=message("prompt", "length", (2, 0, 1))):
        square.generate(jnp.zeros((2, 0, 1)), 3)
    with pytest.raises(ValueError, match=message("x", "length", (0, 1))):
        square.recurrent(jnp.zeros((0, 1)))
    with pytest.raises(ValueError, match=message("state", "(2,)")):
        square.step(square.init_state((3,)), jnp.zeros((2, 1)), square.discrete_system(12))


@layer_names
def test_architecture_rebuilds_the_same_model(layer):
    from annotated_ssm.config import ModelConfig
    from annotated_ssm.model import model_from_architecture

    classifier = SequenceClassifier(layer, 3, 5, pooling="last", norm="batch", glu=False, rngs=nnx.Rngs(2), **SMALL)
    causal = CausalSequenceModel(layer, 2, 4, dropout=0.1, rngs=nnx.Rngs(2), **SMALL)
    for model in (classifier, causal):
        rebuilt = model_from_architecture(model.architecture, rngs=nnx.Rngs(2))
        assert type(rebuilt) is type(model) and rebuilt.architecture == model.architecture
        same = jax.tree.map(np.array_equal, nnx.state(rebuilt, nnx.Param), nnx.state(model, nnx.Param))
        assert all(jax.tree.leaves(same))  # same seed, same architecture: the same parameters
    assert classifier.architecture["pooling"] == "last" and classifier.architecture["n_classes"] == 5
    assert causal.architecture["d_output"] == 4 and causal.architecture["dropout"] == 0.1
    # the defaults of the constructors are ModelConfig's (one source)
    defaults = SequenceClassifier(layer, 1, 2, rngs=nnx.Rngs(0)).architecture
    config = ModelConfig()
    assert {k: defaults[k] for k in ("d_model", "n_layers", "state_size", "norm", "glu", "dropout")} == \
        {k: getattr(config, k) for k in ("d_model", "n_layers", "state_size", "norm", "glu", "dropout")}
    with pytest.raises(ValueError, match=message("model", "RNN")):
        model_from_architecture({**causal.architecture, "model": "RNN"}, rngs=nnx.Rngs(0))
    with pytest.raises(ValueError, match=message("CausalSequenceModel", "d_output")):
        model_from_architecture({k: v for k, v in causal.architecture.items() if k != "d_output"}, rngs=nnx.Rngs(0))


@layer_names
def test_count_dense_params_is_everything_but_the_ssm_layers(layer):
    from annotated_ssm.config import ModelConfig
    from annotated_ssm.model import count_dense_params

    for glu, norm in ((True, "layer"), (False, "batch")):
        config = ModelConfig(layer=layer, glu=glu, norm=norm, **SMALL)
        model = SequenceClassifier(config, 3, 5, rngs=nnx.Rngs(0))
        total = sum(np.size(leaf) for leaf in jax.tree.leaves(nnx.state(model, nnx.Param)))
        ssm = sum(np.size(leaf) for block in model.blocks
                  for leaf in jax.tree.leaves(nnx.state(block.ssm, nnx.Param)))
        assert total - ssm == count_dense_params(config, 3, 5)


def test_a_new_layer_needs_no_special_case(monkeypatch, tmp_path):
    """A layer registered in LAYERS with an option of its own: the config checks the option's
    name against the constructor, the model passes it on, a checkpoint stores and restores it."""
    from annotated_ssm.checkpoint import load_model, save_checkpoint
    from annotated_ssm.config import ModelConfig

    monkeypatch.setitem(LAYERS, "toy", ToyLayer)
    config = ModelConfig(layer="toy", layer_options={"gain": 2.0}, **SMALL)
    model = CausalSequenceModel(config, 1, 1, rngs=nnx.Rngs(0))
    assert all(block.ssm.gain == 2.0 for block in model.blocks)
    assert model.architecture["layer_options"] == {"gain": 2.0}
    loaded = load_model(save_checkpoint(tmp_path / "toy", model))
    assert loaded.config == config and loaded.blocks[0].ssm.gain == 2.0
    with pytest.raises(ValueError, match=message("toy", "init")):
        ModelConfig(layer="toy", layer_options={"init": "lin"})


def _toy_layer():
    from annotated_ssm.layers.s4d import S4DLayer

    class ToyLayer(S4DLayer):
        """S4D with one option of its own (a stand-in for a layer added to LAYERS)."""

        def __init__(self, d_model, state_size=64, *, bidirectional=False, step_min=1e-3,
                     step_max=1e-1, rngs, gain: float = 1.0):
            super().__init__(d_model, state_size, bidirectional=bidirectional, step_min=step_min,
                             step_max=step_max, rngs=rngs)
            self.gain = gain

    return ToyLayer


ToyLayer = _toy_layer()
