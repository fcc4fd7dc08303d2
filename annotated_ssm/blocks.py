"""The Mamba block and the Mamba-2 block: a selective SSM inside projections, a short causal
convolution and a gate, (…, L, H) → (…, L, H).

An SSM layer (``annotated_ssm.layers``) mixes along time only; Mamba wraps its SSM in a
block that also mixes channels and brings the non-linearity, so that a model is just these
blocks stacked with residual connections and pre-norms (Gu and Dao, 2023, Figure 3; Dao
and Gu, 2024, §7). With E = ``expand`` · H inner channels::

    Mamba (mamba_simple.py)                 Mamba-2 (mamba2_simple.py)
    x, z = in_proj(u)          H → 2E       z, x, B, C, Δ = in_proj(u)   H → 2E + 2GN + heads
    x = SiLU(conv1d(x))        causal, W    x, B, C = SiLU(conv1d(x, B, C))
    y = S6(x)                  Δ, B, C(x)   y = SSD(x; Δ, A, B, C) + D x   heads of P channels
    y = y · SiLU(z)                         y = RMSNorm(y · SiLU(z))
    out = out_proj(y)          E → H        out = out_proj(y)             E → H

The convolution is depthwise (one filter of W taps per channel) and causal: output t sees
inputs t − W + 1 … t, with zeros before the sequence (:func:`causal_depthwise_conv`). Mamba
computes Δ, B and C from the convolved x inside its S6 (Δ through a rank R = ⌈H/16⌉
projection, 2·E·R weights instead of E²); Mamba-2 takes them from the same input projection
as x and convolves B and C with x (they play the roles of keys and queries of the SSD
"attention", x the values).

Both blocks run as a recurrence too: ``init_state`` gives (conv_state, ssm_state), the last
W − 1 inputs of the convolution and the SSM's state, and ``step(state, u_t)`` advances one
time step; ``recurrent(u)`` runs the steps and reproduces ``block(u)``. The S6 of
:class:`MambaBlock` is the package's :class:`~annotated_ssm.layers.s6.S6Layer` (its hooks
``_forward`` and ``_step``), the SSD of :class:`Mamba2Block` is
:func:`annotated_ssm.scan.ssd_scan` and :func:`annotated_ssm.scan.ssd_step`.

Checks and dtypes follow the layers' contract (``layers/base.py``): u (…, L, H) with L >= 1
and no NaN or inf; float32 and float64 are computed in their dtype (float64 end to end
under ``jax_enable_x64``), float16/bfloat16 in float32 and returned in their dtype, integers
and bools in the default float dtype. Parameters are stored in float32. Every product is
computed with ``Precision.HIGHEST`` (a GPU's default float32 product is TF32); the
convolution is W elementwise multiply-adds, no product that could fall to TF32.

Differences from the reference
------------------------------
What stays different from ``mamba_ssm/modules/mamba_simple.py`` (``Mamba``) and
``mamba2_simple.py`` (``Mamba2Simple``), state-spaces/mamba:

Both blocks

- No fused kernels (``mamba_inner_fn``, ``causal_conv1d``, the CUDA selective scan,
  ``selective_state_update``, Triton's ``mamba_split_conv1d_scan_combined`` and its gated
  RMSNorm): the same mathematics in plain JAX, which XLA compiles for a CPU or a GPU.
  Mamba's kernels keep the states in on-chip memory; here S6 runs the package's chunked
  ``selective_scan`` (one chunk of states at a time, recomputed in the backward pass) and
  SSD the chunked algorithm of ``ssd_minimal.py``.
- No inference cache (``inference_params``, ``layer_idx``, ``allocate_inference_cache``,
  in-place ``copy_``): the state is a value, passed to ``step`` and returned by it.
- The convolution state holds the last W − 1 inputs, (…, W − 1, channels) time-major; Mamba's
  buffer holds W (the current input too), (batch, channels, W). Same outputs.
- Options the references have and these blocks do not: ``bias=True`` on the projections,
  ``conv_bias=False``, a non-integer ``expand``, ``dt_init="constant"``, ``dt_scale``, another
  activation; Mamba-2's ``conv_init``, ``dt_limit``, ``learnable_init_states``, ``seq_idx``
  (packed sequences), ``A_init_range`` (fixed at [1, 16]). Their defaults are what is built.
- Parameter groups: A's log and Δ's bias (``log_step_size`` in S6, ``dt_bias`` in Mamba-2) are
  :class:`~annotated_ssm.layers.base.SSMParam`, so the package's training loop gives them its SSM
  learning rate and no weight decay; Mamba marks A_log and D (Mamba-2 also dt_bias)
  ``_no_weight_decay`` and trains everything at one learning rate. D is a plain
  ``nnx.Param`` here, as in every layer of the package, so the package's loop decays it.
- Initialisation: the same distributions (projections and convolution as PyTorch's default
  ``U(±1/√fan_in)``, D = 1, A and Δ as the references), drawn from JAX's random numbers, so
  not the same values for a seed. The rescaling of ``out_proj`` by 1/√(n_layers) that Mamba's
  language model applies (``_init_weights``, ``rescale_prenorm_residual``) belongs to the
  model, not to the block.
- Precision: 16-bit inputs are computed in float32 throughout (Mamba runs the projections
  in bfloat16 and the scan in float32); float64 is supported.

:class:`MambaBlock` only

- Δ's bias is stored as ``log_step_size`` = log Δ₀ with bias = softplus⁻¹(Δ₀) (S6's
  parameterisation, the same function as Mamba's ``dt_proj.bias`` at every value, but the
  optimiser moves log Δ₀ instead of the bias); Δ₀ is log-uniform in [step_min, step_max]
  floored at 1e-4, as Mamba's ``dt_init_floor``.

:class:`Mamba2Block` only

- ``Mamba2Simple`` has no ``step``; this one follows the full ``Mamba2.step`` (conv state,
  SSD state (…, heads, head_dim, state)), for any ``n_groups`` (the reference's plain
  PyTorch step allows one group only; its Triton ``selective_state_update`` allows more).
- Defaults ``head_dim=64`` and ``chunk_size=64`` (the reference's 128 and 256; chunk_size
  changes nothing but speed and rounding).

Not differences from ``Mamba2Simple``, but from the full ``Mamba2`` (``mamba2.py``): the gated
RMSNorm here normalises over all E inner channels at once (``group_size=None``, as
``Mamba2Simple``; ``Mamba2`` normalises each of the ``n_groups`` groups apart), and there is
no ``d_ssm`` < E with a gated MLP beside the SSM.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from ._validation import (
    check,
    check_batch_shape,
    check_finite,
    check_positive_int,
    check_rngs,
    check_shape,
    check_step_bounds,
    check_tree,
    computation_dtypes,
)
from .layers.base import SSMParam, compiled, prepare_input
from .layers.s6 import S6Layer
from .scan import SSD_CHUNK_SIZE, ssd_scan, ssd_step

__all__ = ["MambaStyleBlock", "MambaBlock", "Mamba2Block", "causal_depthwise_conv",
           "gated_rms_norm"]

# Every product in full float32 precision, whatever the global default (TF32 on a GPU).
_FULL = jax.lax.Precision.HIGHEST

#: Mamba's floor on the initial step size Δ₀ (``dt_init_floor``).
DT_INIT_FLOOR = 1e-4
#: Mamba-2's range of -A at initialisation (``A_init_range``).
A_INIT_RANGE = (1.0, 16.0)
#: Mamba-2's epsilon of the gated RMSNorm.
RMS_NORM_EPS = 1e-5


# --- the pieces -----------------------------------------------------------------------------


def causal_depthwise_conv(x, weight, bias, state=None):
    """Causal depthwise convolution over time, one filter of W taps per channel.

    ``y_t = bias + Σ_{k<W} weight[k] ⊙ x_{t-W+1+k}``: the last tap multiplies the current
    input (PyTorch's ``Conv1d(padding=W-1)`` cut to the first L outputs, as Mamba does).
    Inputs before the sequence are ``state`` (the W − 1 inputs that came before), zeros if None.

    Args:
        x: (..., L, C) inputs, time on axis -2.
        weight: (W, C) taps, time-major; bias: (C,).
        state: (..., W - 1, C), or None for zeros.

    Returns:
        (y, new_state): y (..., L, C), new_state (..., W - 1, C) the last W − 1 inputs of
        state and x together (the state for what follows x). Called with L = 1 this is one
        step of the recurrence, with the same arithmetic as the whole sequence.
    """
    W, L = weight.shape[0], x.shape[-2]
    if state is None:
        padded = jnp.pad(x, [(0, 0)] * (x.ndim - 2) + [(W - 1, 0), (0, 0)])
    else:
        padded = jnp.concatenate([state.astype(x.dtype), x], axis=-2)
    y = bias.astype(x.dtype) + weight[0].astype(x.dtype) * padded[..., 0:L, :]
    for k in range(1, W):
        y = y + weight[k].astype(x.dtype) * padded[..., k:k + L, :]
    return y, padded[..., L:, :]


def gated_rms_norm(y, z, weight, eps: float = RMS_NORM_EPS):
    """Mamba-2's ``RMSNormGated`` with ``norm_before_gate=False``: g = y · SiLU(z), then
    ``g / √(mean(g²) + eps) ⊙ weight`` over the last axis. y, z (..., E); weight (E,)."""
    g = y * jax.nn.silu(z)
    return g * jax.lax.rsqrt(jnp.mean(g * g, axis=-1, keepdims=True) + eps) * weight.astype(y.dtype)


def _dense(x, kernel):
    """x (..., in) @ kernel (in, out) in x's dtype, full precision."""
    return jnp.matmul(x, kernel[...].astype(x.dtype), precision=_FULL)


def _torch_uniform(fan_in: int):
    """PyTorch's default initialisation of Linear and Conv1d weights and biases:
    U(±1/√fan_in) (kaiming_uniform with a = √5 gives the same bound for the weights)."""
    bound = fan_in ** -0.5

    def init(key, shape, dtype=jnp.float32):
        return jax.random.uniform(key, shape, dtype, -bound, bound)

    return init


def _inverse_softplus(x):
    """log(e^x - 1): the b with softplus(b) = x, for x > 0."""
    return x + jnp.log(-jnp.expm1(-x))


def _log_uniform_steps(key, shape, step_min: float, step_max: float) -> jax.Array:
    """Δ₀ log-uniform in [step_min, step_max], floored at Mamba's ``dt_init_floor``."""
    log_dt = jax.random.uniform(key, shape, jnp.float32, math.log(step_min), math.log(step_max))
    return jnp.maximum(jnp.exp(log_dt), DT_INIT_FLOOR)


# --- what both blocks share: the checks, the dtype policy, the recurrence loop -------------


class MambaStyleBlock(nnx.Module):
    """Public methods of the blocks; subclasses implement ``_forward(u)``,
    ``_init_state(batch_shape, dtype)`` and ``_step(state, u_t)`` on checked arrays."""

    d_model: int
    d_inner: int
    d_conv: int
    conv_channels: int

    def _init_shared(self, d_model, expand, d_conv, rngs) -> None:
        check_rngs(rngs)
        self.d_model = check_positive_int("d_model", d_model)
        self.expand = check_positive_int("expand", expand)
        self.d_conv = check_positive_int("d_conv", d_conv)
        self.d_inner = self.expand * self.d_model

    def _init_conv(self, channels: int, rngs: nnx.Rngs) -> None:
        """``conv_weight`` (W, channels), ``conv_bias`` (channels,): PyTorch's default
        initialisation of a depthwise Conv1d (fan_in = W)."""
        self.conv_channels = channels
        init = _torch_uniform(self.d_conv)
        self.conv_weight = nnx.Param(init(rngs.params(), (self.d_conv, channels)))
        self.conv_bias = nnx.Param(init(rngs.params(), (channels,)))

    def _conv(self, x, state=None):
        return causal_depthwise_conv(x, self.conv_weight[...], self.conv_bias[...], state)

    # --- the whole sequence ---------------------------------------------------------------

    def __call__(self, u):
        """The block on a whole sequence: u (..., L, H) -> (..., L, H), L >= 1 (dtype policy
        in the module docstring)."""
        u, out_dtype = self._check_input(u)
        return compiled(self, "_forward", u).astype(out_dtype)

    def recurrent(self, u):
        """The same output as ``block(u)``, by ``step`` from ``init_state`` (a ``lax.scan``)."""
        u, out_dtype = self._check_input(u)
        return compiled(self, "_recurrent", u).astype(out_dtype)

    def _recurrent(self, u):
        state = self._init_state(u.shape[:-2], u.dtype)
        _, y = jax.lax.scan(self._step, state, jnp.moveaxis(u, -2, 0))
        return jnp.moveaxis(y, 0, -2)

    def _check_input(self, u):
        check_shape("u", u, self.d_model, None)
        return prepare_input("u", u, ("batch", "time", "channel"))

    # --- the recurrence -----------------------------------------------------------------

    def init_state(self, batch_shape=(), dtype=None) -> tuple[jax.Array, jax.Array]:
        """The zero state (conv_state, ssm_state) for a batch of sequences.

        Args:
            batch_shape: () for one sequence, an integer B or a tuple such as (B,).
            dtype: a floating dtype; the state is in its computation dtype (float32 for
                float16/bfloat16; default: the default float dtype, float64 under x64).

        Returns:
            conv_state ``(*batch_shape, d_conv - 1, conv_channels)``, the last inputs of the
            convolution, and the SSM state (see the subclass).
        """
        batch_shape = check_batch_shape("batch_shape", batch_shape)
        dtype = computation_dtypes("dtype", dtype, kinds="f")[0]
        return self._init_state(batch_shape, dtype)

    def step(self, state, u_t) -> tuple[tuple[jax.Array, jax.Array], jax.Array]:
        """One time step: (state, u_t (..., H)) -> (new state, y_t (..., H)).

        ``state`` comes from ``init_state(u_t.shape[:-1])`` or a previous step; stepping from
        ``init_state`` through u reproduces ``block(u)`` up to rounding.
        """
        check_shape("u_t", u_t, self.d_model, None, time=False)
        u_t, out_dtype = prepare_input("u_t", u_t, ("batch", "channel"))
        expected = jax.eval_shape(lambda: self._init_state(u_t.shape[:-1], u_t.dtype))
        batch = u_t.shape[:-1]
        check_tree("state", tuple(state) if isinstance(state, list) else state, expected,
                   f"the pair (conv_state, ssm_state) for u_t's batch shape {batch} (made by "
                   f"init_state({batch}) or returned by step)", batch=batch)
        state = tuple(jnp.asarray(check_finite("state", x, u_t.dtype)) for x in state)
        state, y = compiled(self, "_step", state, u_t)
        return state, y.astype(out_dtype)


# --- Mamba --------------------------------------------------------------------------------


class MambaBlock(MambaStyleBlock):
    """Mamba's block (``mamba_simple.py``): in_proj, causal conv1d + SiLU, S6, SiLU gate,
    out_proj. u (..., L, H) -> (..., L, H).

    Args:
        d_model: H, the block's input and output channels.
        expand: E/H; the SSM runs on E = expand · H channels.
        d_conv: W, taps of the causal depthwise convolution.
        state_size: N, real states per inner channel (S6's state_size).
        dt_rank: R, the rank of Δ's projection E → R → E; "auto": ⌈H/16⌉, Mamba's (from the
            block's H, not from the E channels S6 sees).
        step_min, step_max: bounds of the log-uniform initial Δ (floored at 1e-4).
        rngs: nnx.Rngs; uses ``rngs.params()``.

    Parameters: ``in_proj`` (H → 2E: x, then z; no bias), ``conv_weight`` (W, E),
    ``conv_bias`` (E,), ``ssm`` an :class:`~annotated_ssm.layers.s6.S6Layer` on E channels
    (``log_A_real`` (E, N), ``log_step_size`` (E,), ``x_proj`` E → R + 2N, ``dt_proj`` R → E,
    ``D`` (E,) = 1), ``out_proj`` (E → H, no bias).

    State: (conv_state (..., W - 1, E), ssm_state (..., E, N)).
    """

    def __init__(self, d_model: int, *, expand: int = 2, d_conv: int = 4, state_size: int = 16,
                 dt_rank: int | str = "auto", step_min: float = 1e-3, step_max: float = 1e-1,
                 rngs: nnx.Rngs):
        self._init_shared(d_model, expand, d_conv, rngs)
        H, E = self.d_model, self.d_inner
        if dt_rank == "auto":
            self.dt_rank = math.ceil(H / 16)
        else:
            self.dt_rank = check_positive_int("dt_rank", dt_rank)
        self.in_proj = nnx.Linear(H, 2 * E, use_bias=False, kernel_init=_torch_uniform(H),
                                  rngs=rngs)
        self._init_conv(E, rngs)
        # S6 has Mamba's SSM: A = -(1 … N), Δ = softplus(dt_proj(x_proj(x)[:R]) + b) with dt_proj
        # uniform in ±R^-1/2, real B and C shared by the channels. Where its defaults are the
        # book's rather than Mamba's, set Mamba's: D = 1, x_proj as PyTorch's Linear, Δ₀ floored.
        self.ssm = S6Layer(E, state_size, step_min=step_min, step_max=step_max,
                           dt_rank=self.dt_rank, rngs=rngs)
        self.state_size = self.ssm.state_size
        self.ssm.x_proj.kernel[...] = _torch_uniform(E)(rngs.params(), self.ssm.x_proj.kernel.shape)
        self.ssm.D[...] = jnp.ones((E,), jnp.float32)
        floored = jnp.maximum(self.ssm.log_step_size[...], math.log(DT_INIT_FLOOR))
        self.ssm.log_step_size[...] = floored
        self.out_proj = nnx.Linear(E, H, use_bias=False, kernel_init=_torch_uniform(E), rngs=rngs)

    def _forward(self, u):
        E = self.d_inner
        xz = _dense(u, self.in_proj.kernel)
        x, z = xz[..., :E], xz[..., E:]
        x = jax.nn.silu(self._conv(x)[0])
        y = self.ssm._forward(x)  # S6 on E channels, D x included
        return _dense(y * jax.nn.silu(z), self.out_proj.kernel)

    def _init_state(self, batch_shape, dtype):
        """conv_state (*batch_shape, W - 1, E), ssm_state (*batch_shape, E, N), zeros."""
        return (jnp.zeros(batch_shape + (self.d_conv - 1, self.d_inner), dtype),
                self.ssm._init_state(batch_shape, dtype))

    def _step(self, state, u_t):
        conv_state, ssm_state = state
        E = self.d_inner
        xz = _dense(u_t, self.in_proj.kernel)
        x, z = xz[..., :E], xz[..., E:]
        x, conv_state = self._conv(x[..., None, :], conv_state)
        x = jax.nn.silu(x[..., 0, :])
        ssm_state, y = self.ssm._step(self.ssm._discrete_system(None, x.dtype), ssm_state, x)
        return (conv_state, ssm_state), _dense(y * jax.nn.silu(z), self.out_proj.kernel)


# --- Mamba-2 ------------------------------------------------------------------------------


class Mamba2Block(MambaStyleBlock):
    """Mamba-2's block (``mamba2_simple.py``): one in_proj for z, x, B, C and Δ, causal conv1d
    + SiLU over (x, B, C), SSD with a scalar A per head and D skip, gated RMSNorm, out_proj.
    u (..., L, H) -> (..., L, H).

    Args:
        d_model: H, the block's input and output channels.
        expand: E/H; the SSD runs on E = expand · H channels, in heads of ``head_dim``.
        d_conv: W, taps of the causal depthwise convolution.
        state_size: N, the state's columns per head (a head's state is head_dim × N).
        head_dim: P, channels per head; must divide E. heads = E / P.
        n_groups: G, groups of heads sharing B and C; must divide heads.
        chunk_size: steps per chunk of :func:`annotated_ssm.scan.ssd_scan`.
        step_min, step_max: bounds of the log-uniform initial Δ (floored at 1e-4).
        rngs: nnx.Rngs; uses ``rngs.params()``.

    Parameters: ``in_proj`` (H → 2E + 2GN + heads, in the order z, x, B, C, Δ; no bias),
    ``conv_weight`` (W, E + 2GN), ``conv_bias`` (E + 2GN,), ``log_A_real`` (heads,) with
    -A ~ U[1, 16] and ``dt_bias`` (heads,) with softplus(dt_bias) log-uniform in [step_min,
    step_max] (both :class:`SSMParam`), ``D`` (heads,) = 1, ``norm_weight`` (E,) = 1,
    ``out_proj`` (E → H, no bias).

    State: (conv_state (..., W - 1, E + 2GN), ssm_state (..., heads, P, N)).
    """

    def __init__(self, d_model: int, *, expand: int = 2, d_conv: int = 4, state_size: int = 64,
                 head_dim: int = 64, n_groups: int = 1, chunk_size: int = SSD_CHUNK_SIZE,
                 step_min: float = 1e-3, step_max: float = 1e-1, rngs: nnx.Rngs):
        self._init_shared(d_model, expand, d_conv, rngs)
        H, E = self.d_model, self.d_inner
        self.state_size = check_positive_int("state_size", state_size)
        self.head_dim = check_positive_int("head_dim", head_dim)
        check("head_dim", head_dim, E % head_dim == 0,
              f"divide the inner width expand · d_model = {E}")
        self.n_heads = E // self.head_dim
        self.n_groups = check_positive_int("n_groups", n_groups)
        check("n_groups", n_groups, self.n_heads % n_groups == 0, f"divide the number of heads, "
              f"{self.n_heads} (inner width {E} / head_dim {self.head_dim})")
        self.chunk_size = check_positive_int("chunk_size", chunk_size)
        self.step_min, self.step_max = check_step_bounds(step_min, step_max)
        G, N, heads = self.n_groups, self.state_size, self.n_heads
        self.in_proj = nnx.Linear(H, 2 * E + 2 * G * N + heads, use_bias=False,
                                  kernel_init=_torch_uniform(H), rngs=rngs)
        self._init_conv(E + 2 * G * N, rngs)
        step = _log_uniform_steps(rngs.params(), (heads,), self.step_min, self.step_max)
        self.dt_bias = SSMParam(_inverse_softplus(step))
        minus_A = jax.random.uniform(rngs.params(), (heads,), jnp.float32, *A_INIT_RANGE)
        self.log_A_real = SSMParam(jnp.log(minus_A))
        self.D = nnx.Param(jnp.ones((heads,), jnp.float32))
        self.norm_weight = nnx.Param(jnp.ones((E,), jnp.float32))
        self.out_proj = nnx.Linear(E, H, use_bias=False, kernel_init=_torch_uniform(E), rngs=rngs)

    def eigenvalues(self, dtype=None) -> jax.Array:
        """A (heads,), real and negative."""
        log_A = self.log_A_real[...] if dtype is None else self.log_A_real[...].astype(dtype)
        return -jnp.exp(log_A)

    def _split(self, projected):
        """in_proj's output (..., 2E + 2GN + heads) -> z (..., E), xBC (..., E + 2GN) and
        Δ = softplus(· + dt_bias) (..., heads)."""
        E, GN = self.d_inner, self.n_groups * self.state_size
        z, xBC, dt = (projected[..., :E], projected[..., E:2 * E + 2 * GN],
                      projected[..., 2 * E + 2 * GN:])
        return z, xBC, jax.nn.softplus(dt + self.dt_bias[...].astype(dt.dtype))

    def _ssd_inputs(self, xBC, dt):
        """x (..., heads, P), Δ·x, Δ·A (..., heads), B, C (..., G, N) from the convolved xBC."""
        E, G, N = self.d_inner, self.n_groups, self.state_size
        x = xBC[..., :E].reshape(xBC.shape[:-1] + (self.n_heads, self.head_dim))
        B = xBC[..., E:E + G * N].reshape(xBC.shape[:-1] + (G, N))
        C = xBC[..., E + G * N:].reshape(xBC.shape[:-1] + (G, N))
        return x, dt[..., None] * x, dt * self.eigenvalues(dt.dtype), B, C

    def _output(self, x, y, z):
        """D skip per head, heads back to E channels, gated RMSNorm, out_proj."""
        y = y + self.D[...].astype(y.dtype)[:, None] * x
        y = y.reshape(y.shape[:-2] + (self.d_inner,))
        return _dense(gated_rms_norm(y, z, self.norm_weight[...]), self.out_proj.kernel)

    def _forward(self, u):
        L = u.shape[-2]
        z, xBC, dt = self._split(_dense(u, self.in_proj.kernel))
        xBC = jax.nn.silu(self._conv(xBC)[0])
        x, dt_x, log_a, B, C = self._ssd_inputs(xBC, dt)
        flat = lambda a: a.reshape((-1, L) + a.shape[u.ndim - 1:])  # noqa: E731  (batch, L, ...)
        y, _ = ssd_scan(flat(dt_x), flat(log_a), flat(B), flat(C), chunk_size=self.chunk_size)
        return self._output(x, y.reshape(x.shape), z)

    def _init_state(self, batch_shape, dtype):
        """conv_state (*batch_shape, W - 1, E + 2GN), ssm_state (*batch_shape, heads, P, N)."""
        return (jnp.zeros(batch_shape + (self.d_conv - 1, self.conv_channels), dtype),
                jnp.zeros(batch_shape + (self.n_heads, self.head_dim, self.state_size), dtype))

    def _step(self, state, u_t):
        conv_state, ssm_state = state
        z, xBC, dt = self._split(_dense(u_t, self.in_proj.kernel))
        xBC, conv_state = self._conv(xBC[..., None, :], conv_state)
        x, dt_x, log_a, B, C = self._ssd_inputs(jax.nn.silu(xBC[..., 0, :]), dt)
        ssm_state, y = ssd_step(ssm_state, dt_x, log_a, B, C)
        return (conv_state, ssm_state), self._output(x, y, z)

