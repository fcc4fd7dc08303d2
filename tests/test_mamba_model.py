"""Models of Mamba blocks (``ModelConfig(block="mamba"|"mamba2")``): the recurrence equals the
call, a model trains with ``fit``, saves and loads with identical predictions, the command
line builds one, and the options that apply only to the residual block are refused by name."""

import json

import numpy as np
import pytest
from flax import nnx

from annotated_ssm.checkpoint import load_model
from annotated_ssm.config import ModelConfig, TrainConfig
from annotated_ssm.model import CausalSequenceModel
from annotated_ssm.train import build_model, fit
from test_cli import run as cli
from test_hostile_training import DATA, SMALL, cli_data  # noqa: F401

OPTIONS = {"mamba": ("s6", {}), "mamba2": ("ssd", {"head_dim": 8, "chunk_size": 5})}
X = np.random.default_rng(0).standard_normal((2, 13, 3)).astype(np.float32)


@pytest.mark.parametrize("block", OPTIONS)
def test_the_recurrence_equals_the_call_and_generation_continues(block):
    layer, options = OPTIONS[block]
    model = CausalSequenceModel(layer, 3, 3, block=block, d_model=16, n_layers=2, state_size=4,
                                rngs=nnx.Rngs(0), **options)
    model.eval()
    call, steps = np.asarray(model(X)), np.asarray(model.recurrent(X))
    error = np.max(np.abs(call - steps)) / np.max(np.abs(call))
    assert error <= 1e-5, error
    generated = np.asarray(model.generate(X[:, :4], 5))
    assert generated.shape == (2, 8, 3)
    np.testing.assert_allclose(generated[:, :4], call[:, :4], atol=1e-5 * np.abs(call).max())


@pytest.mark.parametrize("block", OPTIONS)
def test_a_mamba_model_trains_saves_and_loads(block, tmp_path):
    layer, options = OPTIONS[block]
    config = ModelConfig(layer=layer, block=block, d_model=8, n_layers=1, state_size=4,
                         layer_options={k: v for k, v in options.items() if k != "head_dim"}
                         | ({"head_dim": 4} if block == "mamba2" else {}))
    model = build_model(config, DATA)
    history = fit(model, DATA, TrainConfig(epochs=3, batch_size=10, lr=2e-2, progress=False),
                  checkpoint=tmp_path / "run")
    assert history.train_loss[-1] < history.train_loss[0]
    loaded = load_model(tmp_path / "run")
    assert loaded.architecture["block"] == block
    np.testing.assert_array_equal(np.asarray(loaded(DATA.x_test)), np.asarray(model(DATA.x_test)))


def test_the_command_line_builds_a_mamba_model(tmp_path, capsys, cli_data):
    argv = [*SMALL[:3], "s6", *SMALL[4:], "--block", "mamba", "--max-steps", "2", "--json",
            "--dropout", "0", "--checkpoint", str(tmp_path / "run")]
    status, out, err = cli(argv, capsys)
    assert status == 0, err
    assert json.loads(out.splitlines()[-1])["steps"] == 2


@pytest.mark.parametrize("change, named", [
    (dict(block="mamba", layer="s4d"), "layer='s4d'"),
    (dict(block="mamba2", layer="ssd", bidirectional=True), "bidirectional=True"),
    (dict(block="mamba", layer="s6", dropout=0.1), "dropout=0.1"),
    (dict(block="mamba", layer="s6", layer_options={"init": "lin"}), "'init'"),
    (dict(block="transformer"), "'transformer'"),
])
def test_options_of_the_residual_block_are_refused_by_name(change, named):
    with pytest.raises(ValueError, match=named):
        ModelConfig(**change)
