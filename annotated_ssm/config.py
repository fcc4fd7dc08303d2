"""The two configurations of a run, with every default in one place.

- :class:`ModelConfig`: the architecture (layer, widths, depth, norm, layer options, …),
  the one schema of a model: the models are built from it (``annotated_ssm.model``), and a
  checkpoint stores ``to_dict()`` beside the data's shapes, from which ``load_model``
  rebuilds the model.
- :class:`TrainConfig`: the optimiser, the step budget, the validation split, the seed.

Each field carries its help text in ``metadata["help"]``; the command line
(``annotated_ssm.cli``) is generated from these fields, so a default or a help text is
changed here and nowhere else. Both classes check every value once, when they are built
(``ValueError`` naming the field, the value and what is allowed), so a bad argument stops
a run before any data is loaded or anything compiled.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
from typing import Any


from ._validation import (MAX_SEED, check_bool, check_choice, check_positive_int, check_real_in,
                          check_seed, check_step_bounds)
from .layers import LAYERS, get_layer

__all__ = ["ModelConfig", "TrainConfig", "NORMS", "POOLINGS", "TASKS", "MAX_LAYERS", "MAX_SEED",
           "check_seed"]

NORMS = ("layer", "batch")
POOLINGS = ("mean", "last")
TASKS = ("classification", "regression")
MAX_LAYERS = 1024  # deeper than any SSM of the papers by 16x; a stored n_layers = 10**6 is refused


def _field(default: Any, help: str, **metadata) -> Any:
    """A dataclass field with help text (and, optionally, "choices") for the command line."""
    if isinstance(default, dict):
        return dataclasses.field(default_factory=lambda: dict(default),
                                 metadata={"help": help, **metadata})
    return dataclasses.field(default=default, metadata={"help": help, **metadata})




def _checked(instance: Any, name: str, check, *args, **kwargs) -> None:
    """Check a field of a frozen dataclass and store the value the check returns (an int,
    float or bool, never a NumPy scalar that JSON could not store)."""
    object.__setattr__(instance, name, check(name, getattr(instance, name), *args, **kwargs))


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    """The architecture of a deep SSM (see ``annotated_ssm.model``); validated when built.

    The data set fixes the rest: input channels, and classes (a ``SequenceClassifier``) or
    targets per step (a ``CausalSequenceModel``). ``layer_options`` are keyword arguments
    of the layer's constructor beyond the fields here (S4D's ``init``, S5's ``blocks``, …):
    their names are checked against that constructor's signature, so a layer added to
    ``annotated_ssm.layers.LAYERS`` needs nothing here; their values are the layer's own
    to check, when the model is built.
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

    _BUILT_BY_THE_MODEL = ("d_model", "state_size", "bidirectional", "step_min", "step_max",
                           "rngs")
    """Layer arguments the model passes itself, from the fields above."""

    def __post_init__(self):
        check_choice("layer", self.layer, LAYERS)
        for name in ("d_model", "n_layers", "state_size"):
            _checked(self, name, check_positive_int)
        if self.n_layers > MAX_LAYERS:  # building is a Python loop: 10**6 blocks take minutes
            raise ValueError(f"n_layers must be an integer in [1, {MAX_LAYERS}]; got "
                             f"{self.n_layers}.")
        check_choice("norm", self.norm, NORMS)
        check_choice("pooling", self.pooling, POOLINGS)
        for name in ("glu", "bidirectional"):
            _checked(self, name, check_bool)
        _checked(self, "dropout", check_real_in, 0.0, 1.0, closed_high=False)
        parameters = self.layer_parameters()
        # The layers' own check (real, normal in float32, where log Δ is stored; step_min <=
        # step_max), now, with a bound left as None standing for the layer's default.
        step_min, step_max = (parameters[n].default if getattr(self, n) is None
                              else getattr(self, n) for n in ("step_min", "step_max"))
        step_min, step_max = check_step_bounds(step_min, step_max)
        for name, value in (("step_min", step_min), ("step_max", step_max)):
            if getattr(self, name) is not None:
                object.__setattr__(self, name, value)
        self._check_layer_options(parameters)

    def layer_parameters(self) -> dict[str, inspect.Parameter]:
        """The parameters of the layer's constructor, by name (``self`` left out)."""
        parameters = dict(inspect.signature(get_layer(self.layer).__init__).parameters)
        parameters.pop("self", None)
        return parameters

    def _check_layer_options(self, parameters: dict[str, inspect.Parameter]) -> None:
        options = self.layer_options
        if not isinstance(options, dict) or not all(
                isinstance(key, str) and key.isidentifier() for key in options):
            raise ValueError("layer_options must be a dict with identifier keys; got "
                             f"{options!r}.")
        reserved = set(self._BUILT_BY_THE_MODEL) & set(options)
        if reserved:
            raise ValueError(f"layer_options may not set {sorted(reserved)}: they are ModelConfig "
                             "fields.")
        takes_any = any(p.kind is p.VAR_KEYWORD for p in parameters.values())
        allowed = [name for name, p in parameters.items()
                   if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)
                   and name not in self._BUILT_BY_THE_MODEL]
        unknown = sorted(set(options) - set(allowed))
        if unknown and not takes_any:
            raise ValueError(f"layer {self.layer!r} takes no option {unknown[0]!r}; its options: "
                             f"{', '.join(allowed) or 'none'}.")
        try:  # a checkpoint records them: find out now, not after training
            json.dumps(options, allow_nan=False)
        except (TypeError, ValueError) as error:
            raise ValueError("layer_options must be storable as JSON in a checkpoint (str, finite "
                             f"numbers, bools, None, lists, dicts); got {options!r} "
                             f"({error}).") from error

    def check_task(self, task: str) -> None:
        """ValueError if an option does not apply to ``task``: a regression (causal,
        autoregressive) model is never bidirectional and does not pool."""
        check_choice("task", task, TASKS)
        if task == "regression" and self.bidirectional:
            raise ValueError("bidirectional=True does not apply to a regression (autoregressive) "
                             "data set: its model, a CausalSequenceModel, is causal (each output "
                             "may only see the past), so bidirectional must be False.")
        if task == "regression" and self.pooling != POOLINGS[0]:
            raise ValueError(f"pooling={self.pooling!r} does not apply to a regression data set: "
                             "its model predicts every step and does not pool.")

    def layer_kwargs(self) -> dict[str, Any]:
        """The keywords each block passes to the layer besides d_model, state_size,
        bidirectional and rngs: the step bounds that are set, and the layer options."""
        bounds = {name: getattr(self, name) for name in ("step_min", "step_max")
                  if getattr(self, name) is not None}
        return {**bounds, **self.layer_options}

    def to_dict(self) -> dict[str, Any]:
        """Every field, JSON-ready (what a checkpoint stores)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> ModelConfig:
        """The config whose ``to_dict()`` is ``values``; ValueError naming an unknown key."""
        if not isinstance(values, dict):
            raise ValueError(f"a ModelConfig needs a dict; got {values!r}.")
        unknown = sorted(set(values) - {f.name for f in dataclasses.fields(cls)})
        if unknown:
            raise ValueError(f"ModelConfig has no field {unknown[0]!r} (layer-specific options go "
                             "in layer_options).")
        return cls(**values)

    @classmethod
    def of(cls, layer: str | ModelConfig, **kwargs) -> ModelConfig:
        """The config a model is built from: ``layer`` itself if it is a ModelConfig (then no
        keywords), else a layer name with the fields and layer options as keywords
        (:meth:`from_kwargs`)."""
        if isinstance(layer, cls):
            if kwargs:
                raise ValueError("pass either a ModelConfig or keyword arguments, not both; got "
                                 f"also {sorted(kwargs)}.")
            return layer
        return cls.from_kwargs(layer=layer, **kwargs)

    @classmethod
    def from_kwargs(cls, **kwargs) -> ModelConfig:
        """The config of a model built with flat keywords, ``SequenceClassifier("s4d", 1, 10,
        d_model=64, init="lin")``: the fields by name, every other keyword a layer option."""
        names = {f.name for f in dataclasses.fields(cls)}
        options = dict(kwargs.pop("layer_options", None) or {})
        both = sorted(set(options) & set(kwargs))
        if both:
            raise ValueError(f"layer option {both[0]!r} given twice (as a keyword and in "
                             "layer_options).")
        options.update({k: kwargs.pop(k) for k in list(kwargs) if k not in names})
        return cls(**kwargs, layer_options=options)


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """Hyper-parameters of a run; validated when built.

    The budget is counted in optimiser updates ("steps" in the field names; not the layers'
    recurrence steps): ``min(epochs × updates per epoch, max_steps)``. The cosine schedule
    spans exactly that many updates, so two layers given the same config make the same
    number of updates with the same schedule, however fast each one is.
    """

    epochs: int = _field(10, "passes over the training set (after the validation split)")
    batch_size: int = _field(64, "global batch size (split over the devices; divisible by their "
                                 "number)")
    lr: float = _field(4e-3, "peak learning rate of the ordinary parameters (AdamW)")
    ssm_lr: float = _field(1e-3, "peak learning rate of the SSM parameters (Adam, no weight decay)")
    weight_decay: float = _field(0.05, "AdamW decoupled weight decay of the ordinary parameters")
    warmup_fraction: float = _field(0.1, "share of the optimiser updates spent warming the learning "
                                         "rate up from 0, in [0, 1)")
    seed: int = _field(0, "seed of the initialisation, the validation split and the shuffling "
                          "(epoch e: seed + e)")
    max_steps: int | None = _field(None, "budget of optimiser updates: stop (and end the schedule) "
                                         "after this many")
    validation_fraction: float = _field(0.1, "share of the training set held out for validation, "
                                             "in [0, 1); 0: no validation")
    keep_best: bool = _field(True, "at the end, keep the weights of the epoch with the best "
                                   "validation score")
    eval_batch_size: int = _field(500, "batch size of evaluation")
    progress: bool = _field(True, "show a progress bar per epoch and keep a line per epoch "
                                  "(loss, validation, time)")
    save_every_steps: int | None = _field(None, "with a checkpoint folder: save the training state "
                                                "after every this many optimiser updates (also "
                                                "after the first, on SIGINT/SIGTERM and at the "
                                                "end)")
    save_every_minutes: float | None = _field(10.0, "with a checkpoint folder: save the training "
                                                    "state when this many minutes have passed "
                                                    "since the last save")

    RESUME_IRRELEVANT = ("progress", "save_every_steps", "save_every_minutes", "eval_batch_size")
    """Fields a resumed run may change: they do not change what is trained."""

    def __post_init__(self):
        for name in ("epochs", "batch_size", "eval_batch_size"):
            _checked(self, name, check_positive_int)
        _checked(self, "seed", check_seed)
        for name in ("lr", "ssm_lr", "weight_decay"):
            _checked(self, name, check_real_in, 0.0)
        for name in ("warmup_fraction", "validation_fraction"):
            _checked(self, name, check_real_in, 0.0, 1.0, closed_high=False)
        for name in ("keep_best", "progress"):
            _checked(self, name, check_bool)
        if self.max_steps is not None:
            _checked(self, "max_steps", check_positive_int)
        if self.save_every_steps is not None:
            _checked(self, "save_every_steps", check_positive_int)
        if self.save_every_minutes is not None:
            _checked(self, "save_every_minutes", check_real_in, 0.0, open_low=True)
