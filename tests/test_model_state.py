"""State in, state out for models (issue 41): ``CausalSequenceModel(x, state=..., return_state=True)``
carries every block's state; ``generate`` prefills its prompt with one such call, then steps."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from annotated_ssm.layers import LAYERS
from annotated_ssm.model import CausalSequenceModel

SMALL = dict(d_model=8, n_layers=2, state_size=4)
#: DSS-exp streams; DSS-softmax (its default) cannot, and generate then steps the prompt.
OPTIONS = {"dss": {"variant": "exp"}}


def error(got, expected) -> float:
    """max |got - expected| / max |expected| over the leaves of two pytrees (integers exact)."""
    worst = 0.0
    for g, e in zip(jax.tree.leaves(got), jax.tree.leaves(expected), strict=True):
        g, e = np.asarray(g), np.asarray(e)
        assert g.shape == e.shape and g.dtype == e.dtype
        if np.issubdtype(e.dtype, np.integer):
            assert np.array_equal(g, e)
        else:
            worst = max(worst, float(np.max(np.abs(g - e)) / max(np.max(np.abs(e)), 1e-30)))
    return worst


def make(name, **kwargs):
    return CausalSequenceModel(name, 1, 1, rngs=nnx.Rngs(2), **SMALL, **{**OPTIONS.get(name, {}), **kwargs})


def stepped(model, x, length):
    """The prompt read by ``step`` from the zero state (generate's former prefill)."""
    system = model.discrete_system(length)
    state, y = jax.lax.scan(lambda s, x_t: model.step(s, x_t, system), model.init_state(x.shape[:-2]),
                            jnp.moveaxis(x, -2, 0))
    return jnp.moveaxis(y, 0, -2), state, system


def generate_by_steps(model, prompt, n_steps):
    """generate as it was before prefill: every prompt step through the recurrence."""
    y_prompt, state, system = stepped(model, prompt, prompt.shape[-2] + n_steps - 1)

    def feed_back(carry, _):
        s, y_t = carry
        s, y_next = model.step(s, y_t, system)
        return (s, y_next), y_next

    _, y_free = jax.lax.scan(feed_back, (state, y_prompt[:, -1]), None, length=n_steps - 1)
    return jnp.concatenate([y_prompt, jnp.moveaxis(y_free, 0, 1)], axis=1)


@pytest.mark.parametrize("name", list(LAYERS))
def test_prefill_state_equals_stepped_state_and_generate_is_unchanged(name):
    model = make(name)
    model.eval()
    x = jax.random.normal(jax.random.key(1), (2, 13, 1))
    prompt = x[:, :6]
    y_prefill, state_prefill = model(prompt, return_state=True)
    y_steps, state_steps, _ = stepped(model, prompt, 6 + 5 - 1)
    errors = {"prefill y": error(y_prefill, y_steps), "prefill state": error(state_prefill, state_steps)}
    errors["generate"] = error(model.generate(prompt, 5), generate_by_steps(model, prompt, 5))
    # A sequence in two pieces with the states carried equals one pass.
    y, final = model(x, return_state=True)
    y_first, state = model(x[:, :6], return_state=True)
    y_second, state = model(x[:, 6:], state=state, return_state=True)
    errors["pieces y"] = error(jnp.concatenate([y_first, y_second], axis=1), y)
    errors["pieces state"] = error(state, final)
    errors["y = model(x)"] = error(y, model(x))
    print(name, {k: f"{v:.1e}" for k, v in errors.items()})
    # Fed back through 5 steps, generate's float32 rounding grows a little (measured <= 7e-6).
    assert errors.pop("generate") < 2e-5 and max(errors.values()) < 1e-5, errors


def test_generate_steps_the_prompt_when_a_layer_cannot_stream():
    model = make("dss", variant="softmax")
    model.eval()
    prompt = jax.random.normal(jax.random.key(1), (2, 6, 1))
    assert not model.blocks[0].ssm.accepts_state
    assert error(model.generate(prompt, 4), generate_by_steps(model, prompt, 4)) < 1e-6


def test_prefill_in_train_mode_is_inference_and_changes_nothing():
    """BatchNorm's running statistics and no dropout, as the steps (generate is inference)."""
    model = make("s4d", norm="batch", dropout=0.3)
    prompt = jax.random.normal(jax.random.key(1), (2, 6, 1))
    variables = (nnx.Param, nnx.BatchStat, nnx.RngCount)
    before = jax.tree.map(np.asarray, nnx.state(model, variables))
    y_train = model.generate(prompt, 4)
    after = jax.tree.map(np.asarray, nnx.state(model, variables))
    assert all(np.array_equal(a, b) for a, b in zip(jax.tree.leaves(before), jax.tree.leaves(after)))
    assert error(y_train, generate_by_steps(model, prompt, 4)) < 1e-5
    model.eval()
    assert error(model.generate(prompt, 4), y_train) < 1e-6


def test_bad_model_states_are_refused_by_name():
    model = make("s5")
    x = jnp.ones((2, 5, 1))
    good = model.init_state(2)
    for bad in (good[:1], good[0], model.init_state(3), "state"):
        with pytest.raises(ValueError, match="state"):
            model(x, state=bad)
    with pytest.raises(ValueError, match="return_state"):
        model(x, return_state=1)
