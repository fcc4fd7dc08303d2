"""The two configurations of a run, with every default in one place.

- :class:`ModelConfig`: the architecture (layer, widths, depth, norm, …). ``build_model``
  turns it into a model, a checkpoint records it, and ``load_model`` rebuilds from it.
- :class:`TrainConfig`: the optimiser, the step budget, the validation split, the seed.

Each field carries its help text in ``metadata["help"]``; the command line
(``python -m annotated_ssm.train``) is generated from these fields, so a default or a help
text is changed here and nowhere else. Both classes check every value when they are built
(``ValueError`` naming the field, the value and what is allowed), so a bad argument stops
a run before any data is loaded or anything compiled.
"""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any

import numpy as np

from ._validation import check_choice, check_step_bounds
from .layers import LAYERS

__all__ = ["ModelConfig", "TrainConfig", "NORMS", "POOLINGS", "MAX_SEED", "check_seed"]

MAX_SEED = 2**32 - 1  # numpy's legacy generators (mnist1d's) take seeds below 2**32

NORMS = ("layer", "batch")
POOLINGS = ("mean", "last")


def _field(default: Any, help: str, **metadata) -> Any:
    """A dataclass field with help text (and, optionally, "choices") for the command line."""
    if isinstance(default, dict):
        return dataclasses.field(default_factory=lambda: dict(default),
                                 metadata={"help": help, **metadata})
    return dataclasses.field(default=default, metadata={"help": help, **metadata})


def _check_int(name: str, value: Any, minimum: int, maximum: int | None = None) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum or (
            maximum is not None and value > maximum):
        allowed = f">= {minimum}" if maximum is None else f"in [{minimum}, {maximum}]"
        raise ValueError(f"{name} must be an integer {allowed}; got {value!r}.")


def check_seed(name: str, value: Any) -> int:
    """Return ``value`` as int; ValueError unless it is an integer in [0, MAX_SEED]
    (a float such as 1.7 is refused, not truncated)."""
    if isinstance(value, np.integer):
        value = int(value)
    _check_int(name, value, 0, MAX_SEED)
    return value


def _check_real(name: str, value: Any, low: float, high: float, *, closed_high: bool = True,
                open_low: bool = False) -> None:
    """value must be a finite real in [low, high] (or (low, …] / […, high) as asked)."""
    ok = (isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
          and (value > low if open_low else value >= low)
          and (value <= high if closed_high else value < high))
    if not ok:
        spelled = f"{'(' if open_low else '['}{low}, {high}{']' if closed_high else ')'}"
        raise ValueError(f"{name} must be a finite number in {spelled}; got {value!r}.")


def _check_bool(name: str, value: Any) -> None:
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be True or False; got {value!r}.")


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    """The architecture of a deep SSM (see ``annotated_ssm.model``); validated when built.

    The data set fixes the rest: input channels, and classes (a ``SequenceClassifier``) or
    targets per step (a ``CausalSequenceModel``).
    """

    layer: str = _field("s4d", "SSM layer", choices=tuple(LAYERS))
    d_model: int = _field(64, "channels H inside the blocks")
    n_layers: int = _field(4, "number of residual blocks")
    state_size: int = _field(64, "state size N of each SSM layer")
    norm: str = _field("layer", "pre-norm of each block", choices=NORMS)
    glu: bool = _field(True, "gated linear unit after the SSM (else a plain Linear)")
    dropout: float = _field(0.0, "dropout rate after each SSM's GELU, in [0, 1)")
    bidirectional: bool = _field(False, "bidirectional layers (classification only)")
    pooling: str = _field("mean", "how a classifier pools over time "
                                  "(classification only)", choices=POOLINGS)
    step_min: float | None = _field(None, "smallest initial step size Δ (None: the layer's own "
                                          "default)")
    step_max: float | None = _field(None, "largest initial step size Δ (None: the layer's own "
                                          "default)")
    layer_options: dict = _field({}, "layer-specific options, e.g. {'init': 'rand'} for s4d")

    def __post_init__(self):
        check_choice("layer", self.layer, LAYERS)
        for name in ("d_model", "n_layers", "state_size"):
            _check_int(name, getattr(self, name), 1)
        check_choice("norm", self.norm, NORMS)
        check_choice("pooling", self.pooling, POOLINGS)
        _check_bool("glu", self.glu)
        _check_bool("bidirectional", self.bidirectional)
        _check_real("dropout", self.dropout, 0.0, 1.0, closed_high=False)
        for name in ("step_min", "step_max"):
            if getattr(self, name) is not None:
                _check_real(name, getattr(self, name), 0.0, math.inf, open_low=True)
        # The layers' own check (normal in float32, where log Δ is stored; step_min <=
        # step_max), now: a bound left to the layer's default stands in as float32's widest.
        f32 = np.finfo(np.float32)
        check_step_bounds(f32.tiny if self.step_min is None else self.step_min,
                          f32.max if self.step_max is None else self.step_max)
        if not isinstance(self.layer_options, dict) or not all(
                isinstance(key, str) and key.isidentifier() for key in self.layer_options):
            raise ValueError("layer_options must be a dict with identifier keys; got "
                             f"{self.layer_options!r}.")
        fields = {"d_model", "state_size", "bidirectional", "rngs", "step_min", "step_max"}
        reserved = fields & set(self.layer_options)
        if reserved:
            raise ValueError(f"layer_options may not set {sorted(reserved)}: they are ModelConfig "
                             "fields.")
        try:  # a checkpoint records them: find out now, not after training
            json.dumps(self.layer_options, allow_nan=False)
        except (TypeError, ValueError) as error:
            raise ValueError("layer_options must be storable as JSON in a checkpoint (str, finite "
                             f"numbers, bools, None, lists, dicts); got {self.layer_options!r} "
                             f"({error}).") from error

    def model_kwargs(self, task: str) -> dict[str, Any]:
        """Keyword arguments of ``SequenceClassifier`` / ``CausalSequenceModel`` for ``task``.

        ValueError if an option does not apply: a regression (causal, autoregressive) model
        is never bidirectional and does not pool.
        """
        check_choice("task", task, ("classification", "regression"))
        if task == "regression":
            if self.bidirectional:
                raise ValueError("bidirectional=True does not apply to a regression "
                                 "(autoregressive) data set: its model is causal, each output may "
                                 "only see the past.")
            if self.pooling != POOLINGS[0]:
                raise ValueError(f"pooling={self.pooling!r} does not apply to a regression data "
                                 "set: its model predicts every step and does not pool.")
        kwargs = dict(d_model=self.d_model, n_layers=self.n_layers, state_size=self.state_size,
                      norm=self.norm, glu=self.glu, dropout=self.dropout,
                      bidirectional=self.bidirectional)
        if task == "classification":
            kwargs["pooling"] = self.pooling
        for name in ("step_min", "step_max"):
            if getattr(self, name) is not None:
                kwargs[name] = getattr(self, name)
        return {**kwargs, **self.layer_options}


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """Hyper-parameters of a run; validated when built.

    The budget is counted in optimiser steps: ``min(epochs × steps per epoch, max_steps)``.
    The cosine schedule spans exactly that many steps, so two layers given the same config
    take the same number of steps with the same schedule, however fast each one is.
    """

    epochs: int = _field(10, "passes over the training set (after the validation split)")
    batch_size: int = _field(64, "global batch size (split over the devices; divisible by their "
                                 "number)")
    lr: float = _field(4e-3, "peak learning rate of the ordinary parameters (AdamW)")
    ssm_lr: float = _field(1e-3, "peak learning rate of the SSM parameters (Adam, no weight decay)")
    weight_decay: float = _field(0.05, "AdamW decoupled weight decay of the ordinary parameters")
    warmup_fraction: float = _field(0.1, "share of the steps spent warming the learning rate up "
                                         "from 0, in [0, 1)")
    seed: int = _field(0, "seed of the initialisation, the validation split and the shuffling "
                          "(epoch e: seed + e)")
    max_steps: int | None = _field(None, "step budget: stop (and end the schedule) after this many "
                                         "steps")
    validation_fraction: float = _field(0.1, "share of the training set held out for validation, "
                                             "in [0, 1); 0: no validation")
    keep_best: bool = _field(True, "at the end, keep the weights of the epoch with the best "
                                   "validation score")
    eval_batch_size: int = _field(500, "batch size of evaluation")
    progress: bool = _field(True, "show a progress bar")
    save_every_steps: int | None = _field(None, "with a checkpoint folder: save the training state "
                                                "every this many steps (also on Ctrl-C and at the "
                                                "end)")
    save_every_minutes: float | None = _field(10.0, "with a checkpoint folder: save the training "
                                                    "state when this many minutes have passed "
                                                    "since the last save")

    RESUME_IRRELEVANT = ("progress", "save_every_steps", "save_every_minutes", "eval_batch_size")
    """Fields a resumed run may change: they do not change what is trained."""

    def __post_init__(self):
        self.validate()

    def validate(self) -> None:
        """ValueError naming the first field whose value is not allowed."""
        for name in ("epochs", "batch_size", "eval_batch_size"):
            _check_int(name, getattr(self, name), 1)
        check_seed("seed", self.seed)
        if self.max_steps is not None:
            _check_int("max_steps", self.max_steps, 1)
        for name in ("lr", "ssm_lr", "weight_decay"):
            _check_real(name, getattr(self, name), 0.0, math.inf)
        _check_real("warmup_fraction", self.warmup_fraction, 0.0, 1.0, closed_high=False)
        _check_real("validation_fraction", self.validation_fraction, 0.0, 1.0, closed_high=False)
        _check_bool("keep_best", self.keep_best)
        _check_bool("progress", self.progress)
        if self.save_every_steps is not None:
            _check_int("save_every_steps", self.save_every_steps, 1)
        if self.save_every_minutes is not None:
            _check_real("save_every_minutes", self.save_every_minutes, 0.0, math.inf, open_low=True)
