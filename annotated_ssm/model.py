"""Deep SSM models: stacked residual blocks around any layer of ``LAYERS``, or Mamba's blocks.

    x ──► encoder ──► block ──► … ──► block ──► pool / per step ──► decoder ──► output
                      │                     │
    block(x) = x + mix(dropout(GELU(SSM(norm(x)))))

- ``ResidualBlock``: pre-norm (LayerNorm or BatchNorm over channels) → SSM layer → GELU →
  dropout → position-wise linear or GLU → add the block's input. The SSM layer mixes along
  time and is linear; the position-wise part mixes channels and brings the non-linearity.
- ``SequenceClassifier``: pools the last block's features over time (mean, or the last step
  for a causal model) and decodes one vector of class scores per sequence. Its layers may
  be bidirectional.
- ``CausalSequenceModel``: decodes every step (sequence-to-sequence regression). Its layers
  are causal, so it also runs as a recurrence: ``step`` advances one time step with each
  layer's recurrent ``step`` and ``generate`` feeds its own predictions back as inputs.
  The recurrence is for inference, in either mode: BatchNorm uses its running statistics
  (a step sees no batch over time) and dropout is off. ``model(x, state=..., return_state=True)``
  carries the state of every block through the fast call (a long sequence in pieces), and
  ``generate`` reads its prompt with one such call (prefill) before stepping::

      y, state = model(x[:, :1000], return_state=True)         # the first piece
      y_next, state = model(x[:, 1000:], state=state, return_state=True)  # = one pass

Shapes: inputs (B, L, d_input); classifier outputs (B, n_classes); causal model outputs
(B, L, d_output). A single unbatched sequence (L, d_input) works too.

The architecture is a :class:`~annotated_ssm.config.ModelConfig` (checked once, there);
``model.architecture`` is its ``to_dict()`` plus what the data fixed (model class, d_input,
n_classes or d_output), which a checkpoint stores and ``model_from_architecture`` rebuilds.
"""

from __future__ import annotations

import os
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from ._validation import check, check_bool, check_choice, check_integers, check_positive_int, check_shape
from .config import MAMBA_BLOCKS, NORMS, POOLINGS, ModelConfig
from .layers import get_layer

__all__ = ["ResidualBlock", "MambaResidualBlock", "SequenceModel", "SequenceClassifier", "CausalSequenceModel", "NORMS", "POOLINGS",
           "model_from_architecture", "count_dense_params", "check_model_fits"]

_DEFAULT = ModelConfig()  # the one place the architecture's defaults are written


class ResidualBlock(nnx.Module):
    """One residual block: ``x + mix(dropout(gelu(ssm(norm(x)))))``, (…, L, H) → (…, L, H).

    Args:
        layer: a layer name from ``annotated_ssm.layers.LAYERS`` ("s4", "dss", "s4d", "s5", "s6").
        d_model: channels H.
        state_size: the layer's N.
        norm: "layer" (LayerNorm) or "batch" (BatchNorm over batch and time).
        glu: position-wise mixing by a gated linear unit (Linear H → 2H, a ⊙ σ(b)) instead
            of a plain Linear H → H.
        dropout: dropout rate after the GELU (active only in ``train()`` mode).
        bidirectional: passed to the layer.
        **layer_kwargs: layer-specific options (e.g. an initialisation).

    The layer checks its own arguments; ``norm`` and ``dropout`` are checked where a model's
    blocks get them, by :class:`~annotated_ssm.config.ModelConfig`.
    """

    def __init__(self, layer: str, d_model: int, state_size: int = _DEFAULT.state_size, *,
                 norm: str = _DEFAULT.norm, glu: bool = _DEFAULT.glu,
                 dropout: float = _DEFAULT.dropout, bidirectional: bool = False, rngs: nnx.Rngs,
                 **layer_kwargs):
        self.norm = _norm(norm, d_model, rngs)
        self.ssm = get_layer(layer)(d_model, state_size, bidirectional=bidirectional, rngs=rngs,
                                    **layer_kwargs)
        self.dropout = nnx.Dropout(dropout, rngs=rngs)
        self.glu = glu
        self.mix = nnx.Linear(d_model, 2 * d_model if glu else d_model, rngs=rngs)

    def _position_wise(self, y, deterministic: bool | None = None):
        """Everything after the SSM: GELU, dropout, channel mixing. Acts on each step alone."""
        y = self.dropout(jax.nn.gelu(y), deterministic=deterministic)
        y = self.mix(y)
        return jax.nn.glu(y, axis=-1) if self.glu else y

    def __call__(self, x, mask=None, *, state=None, return_state: bool = False):
        """The block on a whole sequence x (…, L, H). ``mask`` (…, L, 1), 1 at real steps and 0
        at padding (or None): the SSM reads zeros at padded steps, which then change no real
        step. With ``state``/``return_state``, the SSM layer's state in and out
        (``(y, final_state)`` when ``return_state``)."""
        return self._apply(x, state, return_state, mask=mask, inference=False)

    @property
    def accepts_state(self) -> bool:
        return self.ssm.accepts_state

    def _apply(self, x, state, return_state, *, mask=None, inference: bool):
        """``inference``: BatchNorm's running statistics and no dropout, as ``step`` (prefill)."""
        x_norm = _masked_norm(self.norm, x, mask, inference)
        if state is None and not return_state:
            out = self.ssm(x_norm)
        else:
            out = self.ssm(x_norm, state=state, return_state=return_state)
        y, final = out if return_state else (out, None)
        y = x + self._position_wise(y, deterministic=True if inference else None)
        return (y, final) if return_state else y

    def discrete_system(self, length: int | None = None):
        return self.ssm.discrete_system(length)

    def init_state(self, batch_shape: tuple[int, ...] = ()):
        return self.ssm.init_state(batch_shape)

    def step(self, state, x_t, system):
        """One time step, x_t: (…, H). Norm and mixing act per step, so only the SSM keeps state.
        Inference in either mode: BatchNorm's running statistics, no dropout."""
        state, y_t = self.ssm.step(state, _norm_step(self.norm, x_t), system)
        return state, x_t + self._position_wise(y_t, deterministic=True)


def _norm(norm: str, d_model: int, rngs: nnx.Rngs) -> nnx.Module:
    """The pre-norm named ``norm`` (one of NORMS, checked by ModelConfig)."""
    return {"layer": lambda: nnx.LayerNorm(d_model, rngs=rngs),
            "batch": lambda: nnx.BatchNorm(d_model, momentum=0.9, rngs=rngs)}[norm]()


def _masked_norm(norm: nnx.Module, x, mask=None, inference: bool = False):
    """The pre-norm of a sequence, zero at padded steps (BatchNorm's statistics over the real
    steps only; with ``inference``, its running statistics)."""
    if isinstance(norm, nnx.BatchNorm) and (inference or mask is not None):
        y = norm(x, use_running_average=True) if inference else norm(x, mask=mask.astype(bool))
    else:
        y = norm(x)
    return y if mask is None else y * mask.astype(y.dtype)


def _norm_step(norm: nnx.Module, x_t):
    """The pre-norm of one step: BatchNorm with its running statistics (inference)."""
    return norm(x_t, use_running_average=True) if isinstance(norm, nnx.BatchNorm) else norm(x_t)


class MambaResidualBlock(nnx.Module):
    """``x + block(norm(x))`` with Mamba's or Mamba-2's block (:mod:`annotated_ssm.blocks`),
    which brings its own projections, convolution, gate and non-linearity (Gu and Dao, 2023,
    Figure 3): nothing follows it. (…, L, H) → (…, L, H).

    Args:
        block: "mamba" (S6 inside) or "mamba2" (SSD inside).
        d_model: channels H.
        state_size: the SSM's N.
        norm: "layer" or "batch".
        **options: the block's own keywords (``expand``, ``d_conv``, …) and the step bounds.
    """

    def __init__(self, block: str, d_model: int, state_size: int = _DEFAULT.state_size, *,
                 norm: str = _DEFAULT.norm, rngs: nnx.Rngs, **options):
        self.norm = _norm(norm, d_model, rngs)
        self.mixer = MAMBA_BLOCKS[block](d_model, state_size=state_size, rngs=rngs, **options)

    def __call__(self, x, mask=None):
        """x (…, L, H); ``mask`` as :meth:`ResidualBlock.__call__`'s."""
        return x + self.mixer(_masked_norm(self.norm, x, mask))

    accepts_state = False  # (the blocks' calls start from the zero state: steps carry one)

    def discrete_system(self, length: int | None = None):
        return None  # Δ, B and C come from each input: nothing to compute ahead

    def init_state(self, batch_shape: tuple[int, ...] = ()):
        return self.mixer.init_state(batch_shape)

    def step(self, state, x_t, system=None):
        """One time step, x_t: (…, H): the block's conv and SSM states advance."""
        state, y_t = self.mixer.step(state, _norm_step(self.norm, x_t))
        return state, x_t + y_t


class SequenceModel(nnx.Module):
    """Encoder → ``n_layers`` residual blocks → final norm. Subclasses add pooling and decoder.

    Args:
        layer: a :class:`ModelConfig`, or a layer name ("s4", "dss", "s4d", "s5", …) with
            the config's fields as keywords (``d_model=64, n_layers=4, …``; the defaults
            are ModelConfig's) and any other keyword a layer option (``init="lin"``).
        d_input: input channels per step.
        rngs: random keys (``nnx.Rngs(seed)``; dropout draws from its ``dropout`` stream).
    """

    def __init__(self, layer: str | ModelConfig, d_input: int, *, rngs: nnx.Rngs, **kwargs):
        config = ModelConfig.of(layer, **kwargs)
        self.config = config
        self.d_input = check_positive_int("d_input", d_input)
        self.d_model = config.d_model
        self.layer_name = config.layer
        self.bidirectional = config.bidirectional
        # Everything needed to build this model again (a checkpoint stores it; subclasses
        # add what the data fixes). Plain Python values: nnx treats them as static.
        self.architecture = dict(config.to_dict(), d_input=self.d_input)
        self.encoder = nnx.Linear(d_input, config.d_model, rngs=rngs)
        if config.block == "residual":
            def block():
                return ResidualBlock(config.layer, config.d_model, config.state_size,
                                     norm=config.norm, glu=config.glu, dropout=config.dropout,
                                     bidirectional=config.bidirectional, rngs=rngs,
                                     **config.layer_kwargs())
        else:
            def block():
                return MambaResidualBlock(config.block, config.d_model, config.state_size,
                                          norm=config.norm, rngs=rngs, **config.layer_kwargs())
        self.blocks = nnx.List([block() for _ in range(config.n_layers)])
        self.final_norm = nnx.LayerNorm(config.d_model, rngs=rngs)

    def check_input(self, x, name: str = "x") -> None:
        """ValueError unless x is (B, L, d_input) or (L, d_input) with L >= 1."""
        check_shape(name, x, self.d_input, owner="model's d_input")

    def mask(self, x, lengths):
        """(…, L, 1): 1 at each sequence's real steps (the first ``lengths``), 0 at padding;
        None without lengths. ValueError unless ``lengths`` holds one integer in [1, L] per
        sequence (values checked where they are concrete, not under jit)."""
        if lengths is None:
            return None
        length = np.shape(x)[-2]
        check_integers("lengths", lengths, np.shape(x)[:-2], "lengths", 1, length,
                       f"[1, {length}] (x's length)")
        steps = jnp.arange(length)
        return (steps < jnp.asarray(lengths)[..., None])[..., None].astype(jnp.float32)

    def features(self, x, lengths=None):
        """(…, L, d_input) → (…, L, d_model): the blocks' output before pooling/decoding.
        ``lengths`` (…,): each sequence's own length, padded steps after it ignored."""
        self.check_input(x)
        mask = self.mask(x, lengths)
        h = self.encoder(jnp.asarray(x))
        for block in self.blocks:
            h = block(h, mask)
        return self.final_norm(h)


class SequenceClassifier(SequenceModel):
    """One label per sequence: features pooled over time, then a linear decoder.

    ``pooling="mean"`` averages over all steps (with a bidirectional model every step has
    seen the whole sequence); ``"last"`` reads the final step of a causal model, so the
    whole sequence must be carried through the recurrence.

    Output: logits (B, n_classes) for x (B, L, d_input).
    """

    def __init__(self, layer: str | ModelConfig, d_input: int, n_classes: int, *, rngs: nnx.Rngs,
                 **kwargs):
        super().__init__(layer, d_input, rngs=rngs, **kwargs)
        self.pooling = self.config.pooling
        self.n_classes = check_positive_int("n_classes", n_classes, minimum=2)
        self.architecture = dict(self.architecture, model="SequenceClassifier",
                                 n_classes=self.n_classes)
        self.decoder = nnx.Linear(self.d_model, n_classes, rngs=rngs)

    def __call__(self, x, lengths=None):
        """Logits (…, n_classes); with ``lengths``, pooled over each sequence's real steps (its
        mean, or its own last step)."""
        h = self.features(x, lengths)
        if lengths is None:
            pooled = h.mean(axis=-2) if self.pooling == "mean" else h[..., -1, :]
        elif self.pooling == "mean":
            pooled = (h * self.mask(x, lengths)).sum(axis=-2) / jnp.asarray(lengths)[..., None]
        else:
            last = jnp.asarray(lengths)[..., None, None] - 1
            pooled = jnp.take_along_axis(h, last, axis=-2)[..., 0, :]
        return self.decoder(pooled)


class CausalSequenceModel(SequenceModel):
    """One output per step, each depending only on inputs up to that step.

    ``model(x)`` runs the convolutional (or scan) form on the whole sequence; ``recurrent(x)``
    runs the same model one step at a time; ``generate`` continues a prompt by feeding each
    output back as the next input (needs ``d_output == d_input``).

    Output: (B, L, d_output) for x (B, L, d_input).
    """

    def __init__(self, layer: str | ModelConfig, d_input: int, d_output: int, *, rngs: nnx.Rngs,
                 **kwargs):
        super().__init__(layer, d_input, rngs=rngs, **kwargs)
        self.config.check_task("regression")  # not bidirectional, no pooling
        self.d_output = check_positive_int("d_output", d_output)
        self.decoder = nnx.Linear(self.d_model, d_output, rngs=rngs)
        self.architecture = dict(self.architecture, model="CausalSequenceModel",
                                 d_output=self.d_output)

    def __call__(self, x, lengths=None, *, state=None, return_state: bool = False):
        """Outputs (…, L, d_output) for x (…, L, d_input).

        ``lengths`` (…,): each sequence's own length when sequences of different lengths are
        padded to one L; the outputs at padded steps are zeros. ``state``: the state of every
        block before the first step (a list, as ``init_state``, ``step`` or a previous call
        give it; None: zero). ``return_state``: also return the state of every block after the
        last step, ``(y, final_state)``: carried into the next call, a long sequence runs in
        pieces with the output of one pass. With ``lengths``, the final state is each
        sequence's state after its own last step (a batch of prompts of different lengths,
        prefilled at once); a state passed in then is not allowed.
        """
        return_state = check_bool("return_state", return_state)
        if state is None and not return_state:
            y = self.decoder(self.features(x, lengths))
            return y if lengths is None else y * self.mask(x, lengths)
        if lengths is None:
            return self._run(x, state, return_state, inference=False)
        check("state", state, state is None, "be None with lengths (the sequences would reach "
              "their ends at different steps; cut the batch by length)", "a state")
        # Each sequence moved to the end of the padded length (its padding in front, zeros
        # at every SSM's input there): from the zero state, the state stays zero through the
        # padding, and the state after step L - 1 is the state after the sequence's own end.
        mask = self.mask(x, lengths)
        length = np.shape(x)[-2]
        shift = length - jnp.asarray(lengths)[..., None, None]
        steps = jnp.arange(length)[:, None]
        x = jnp.take_along_axis(jnp.asarray(x), (steps - shift) % length, axis=-2)
        y, final = self._run(x, None, True, mask=steps >= shift, inference=False)
        y = jnp.take_along_axis(y, (steps + shift) % length, axis=-2) * mask
        return y, final

    def _run(self, x, state, return_state, *, mask=None, inference: bool):
        self.check_input(x)
        if not all(block.accepts_state for block in self.blocks):
            raise ValueError("state and return_state need blocks that carry a state through "
                             f"their call; this model's ({self.config.block} blocks of "
                             f"{self.layer_name!r}) do not: use init_state and step instead.")
        if state is None:
            state = [None] * len(self.blocks)
        check("state", state, isinstance(state, (list, tuple)) and len(state) == len(self.blocks),
              f"be a list of {len(self.blocks)} block states (made by init_state or returned "
              "by step or a call)", f"{len(state)} of them" if isinstance(state, (list, tuple))
              else f"a {type(state).__name__}")
        h = self.encoder(jnp.asarray(x))
        final = []
        for block, s in zip(self.blocks, state):
            h, s = block._apply(h, s, True, mask=mask, inference=inference)
            final.append(s)
        y = self.decoder(self.final_norm(h))
        return (y, final) if return_state else y

    # --- recurrent mode ------------------------------------------------------------------

    def discrete_system(self, length: int | None = None) -> list[Any]:
        """Each block's discrete recurrence for sequences of ``length`` steps (computed once)."""
        return [block.discrete_system(length) for block in self.blocks]

    def init_state(self, batch_shape: tuple[int, ...] = ()) -> list[Any]:
        """Zero state of every block for a batch of sequences."""
        return [block.init_state(batch_shape) for block in self.blocks]

    def step(self, state, x_t, system):
        """One time step: x_t (…, d_input) → (new state, y_t (…, d_output))."""
        h = self.encoder(x_t)
        new_state = []
        for block, s, sys in zip(self.blocks, state, system):
            s, h = block.step(s, h, sys)
            new_state.append(s)
        return new_state, self.decoder(self.final_norm(h))

    def recurrent(self, x):
        """The whole sequence by ``step``: equals ``self(x)`` up to float rounding in eval mode
        (in train mode, ``self(x)`` uses the batch's statistics in BatchNorm, and dropout)."""
        self.check_input(x)
        x = jnp.asarray(x)
        system = self.discrete_system(x.shape[-2])
        state = self.init_state(x.shape[:-2])
        _, y = jax.lax.scan(lambda s, x_t: self.step(s, x_t, system), state, jnp.moveaxis(x, -2, 0))
        return jnp.moveaxis(y, 0, -2)

    def generate(self, prompt, n_steps: int):
        """Continue ``prompt`` (B, P, d_input) for ``n_steps`` steps, feeding outputs back.

        The prompt is read in one fast call that returns every block's state (prefill, the
        convolution or scan form: parallel over the prompt), then the model steps: the
        output at each step becomes the next input. A model with a layer that cannot carry a
        state through its call (DSS-softmax) reads the prompt step by step instead. Inference
        in either mode (BatchNorm's running statistics, no dropout). Returns all outputs,
        (B, P + n_steps - 1, d_output): y[:, t] predicts the input at t + 1, so y[:, P - 1:]
        is the continuation (n_steps values). The prompt needs P >= 1 steps (the first
        prediction needs an input).
        """
        check("d_output", self.d_output, self.d_output == self.d_input, "equal d_input for "
              "generate (it feeds outputs back as inputs)", f"d_output={self.d_output}, "
              f"d_input={self.d_input}")
        n_steps = check_positive_int("n_steps", n_steps)
        self.check_input(prompt, "prompt")
        prompt = jnp.asarray(prompt)
        P = prompt.shape[-2]
        system = self.discrete_system(P + n_steps - 1)
        if all(block.accepts_state for block in self.blocks):
            y_prompt, state = self._run(prompt, None, True, inference=True)  # prefill
            y_prompt = jnp.moveaxis(y_prompt, -2, 0)
        else:
            state = self.init_state(prompt.shape[:-2])
            state, y_prompt = jax.lax.scan(lambda s, x_t: self.step(s, x_t, system), state,
                                           jnp.moveaxis(prompt, -2, 0))

        def feed_back(carry, _):
            s, y_t = carry
            s, y_next = self.step(s, y_t, system)
            return (s, y_next), y_next

        _, y_free = jax.lax.scan(feed_back, (state, y_prompt[-1]), None, length=n_steps - 1)
        return jnp.moveaxis(jnp.concatenate([y_prompt, y_free]), 0, -2)


_CLASSES = {"SequenceClassifier": ("n_classes",), "CausalSequenceModel": ("d_output",)}
DATA_KEYS = ("model", "d_input", "n_classes", "d_output")
"""The entries of ``model.architecture`` that the data fixed; the others are ModelConfig's."""


def model_from_architecture(architecture: dict[str, Any], *, rngs: nnx.Rngs) -> SequenceModel:
    """Build a model from its ``architecture`` dict (as recorded by the model and stored in a
    checkpoint): ``{"model": "SequenceClassifier", "d_input": 1, "n_classes": 10,
    **ModelConfig(...).to_dict()}``."""
    name = check_choice("model class", isinstance(architecture, dict) and architecture.get("model"),
                        _CLASSES)
    cls = {"SequenceClassifier": SequenceClassifier, "CausalSequenceModel": CausalSequenceModel}[name]
    needed = ("d_input", *_CLASSES[name])
    check("architecture", architecture, all(key in architecture for key in needed),
          f"hold {', '.join(needed)} for a {name}")
    config = ModelConfig.from_dict({k: v for k, v in architecture.items() if k not in DATA_KEYS})
    check_model_fits(config, architecture["d_input"], architecture[needed[-1]])
    return cls(config, *(architecture[key] for key in needed), rngs=rngs)


def count_dense_params(config: ModelConfig, d_input: int, d_output: int) -> int:
    """The parameters outside the SSM layers (encoder, norms, position-wise mixing, decoder)
    of ``config``'s model, computed without building it: a lower bound of its size for
    any layer (the SSM layers add their own, about H × N each), and its bulk when H is large
    (the mixing is H × H or H × 2H per block)."""
    h = config.d_model
    mix = h * (2 * h if config.glu else h) + (2 * h if config.glu else h)
    block = 2 * h + mix  # the pre-norm's scale and bias, then the mixing
    return d_input * h + h + config.n_layers * block + 2 * h + h * d_output + d_output


def _device_memory() -> int | None:
    """The memory of the first device (its limit for a GPU, the machine's RAM for a CPU)."""
    try:
        stats = jax.local_devices()[0].memory_stats() or {}
        return int(stats.get("bytes_limit") or os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return None


def check_model_fits(config: ModelConfig, d_input: int, d_output: int, *, copies: int = 1) -> None:
    """ValueError, before anything is built, if ``copies`` float32 copies of ``config``'s model
    (1 to build it; 4 to train it with Adam: weights, gradients, two moments) cannot fit the
    device's memory, by a lower bound of its parameters: the dense layers
    (:func:`count_dense_params`) and, per block, the SSM layer's own (each holds at least an
    H × N output matrix C)."""
    d_input, d_output = (check_positive_int(name, value) for name, value in
                         (("d_input", d_input), ("d_output", d_output)))
    n_params = (count_dense_params(config, d_input, d_output)
                + config.n_layers * config.d_model * config.state_size)
    needed, memory = 4 * copies * n_params, _device_memory()
    if memory is not None and needed > memory:
        raise ValueError(f"d_model={config.d_model}, n_layers={config.n_layers}, state_size="
                         f"{config.state_size} make a model of more than {n_params:,} parameters: "
                         f"{'training' if copies > 1 else 'building'} needs at least "
                         f"{needed / 2**30:,.1f} GiB, and this device has "
                         f"{memory / 2**30:,.1f} GiB; choose a smaller d_model, n_layers or "
                         "state_size.")
