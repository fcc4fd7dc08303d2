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
import importlib
import inspect
import json
from typing import Any

__all__ = ["ModelConfig", "TrainConfig", "BLOCKS", "NORMS", "POOLINGS", "TASKS", "MAX_LAYERS",
           "LAYER_NAMES"]

# This module imports no JAX (the layers, the blocks and the checks are imported when first
# used), so that the command line's --help answers at once. Hence the layers' names here: the
# registry's, ``annotated_ssm.layers.LAYERS`` (tests/test_cli.py checks they agree).
LAYER_NAMES = ("s4", "dss", "s4d", "s5", "s6", "ssd")

NORMS = ("layer", "batch")
BLOCKS = ("residual", "mamba", "mamba2")
MAMBA_LAYERS = {"mamba": "s6", "mamba2": "ssd"}  # the SSM inside each Mamba block
POOLINGS = ("mean", "last")
TASKS = ("classification", "regression")
MAX_LAYERS = 1024  # deeper than any SSM of the papers by 16x; a stored n_layers = 10**6 is refused


def __getattr__(name: str) -> Any:
    if name == "MAMBA_BLOCKS":  # the Mamba blocks by name, imported when asked for
        blocks = importlib.import_module(".blocks", __package__)
        return {"mamba": blocks.MambaBlock, "mamba2": blocks.Mamba2Block}
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _validation(rule: str, **options):
    """The function ``(name, value) -> value`` checking a field: ``rule`` of
    :mod:`annotated_ssm._validation` with ``options`` (imported when first used)."""
    def apply(name: str, value: Any) -> Any:
        return getattr(importlib.import_module("._validation", __package__), rule)(
            name, value, **options)
    return apply


def _field(default: Any, help: str, rule=None, **metadata) -> Any:
    """A dataclass field with help text, the rule that checks it (:func:`_validation`; None
    passes where the field's type allows it) and, optionally, "choices" for the command line."""
    metadata = {"help": help, "rule": rule, **metadata}
    if rule is None and "choices" in metadata:
        metadata["rule"] = _validation("check_choice", choices=metadata["choices"])
    if isinstance(default, dict):
        return dataclasses.field(default_factory=lambda: dict(default), metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def _check_fields(instance: Any) -> None:
    """Apply each field's declared rule; store what it returns (an int, float or bool, never
    a NumPy scalar that JSON could not store)."""
    for field in dataclasses.fields(instance):
        value, rule = getattr(instance, field.name), field.metadata["rule"]
        if rule is not None and not (value is None and "None" in str(field.type)):
            object.__setattr__(instance, field.name, rule(field.name, value))


POSITIVE_INT = _validation("check_positive_int")
FRACTION = _validation("check_real_in", low=0.0, high=1.0, closed_high=False)
NON_NEGATIVE = _validation("check_real_in", low=0.0)
BOOL = _validation("check_bool")


def _layer_count(name: str, value: Any) -> int:
    value = POSITIVE_INT(name, value)
    if value > MAX_LAYERS:  # building is a Python loop: 10**6 blocks take minutes
        raise ValueError(f"{name} must be an integer in [1, {MAX_LAYERS}]; got {value}.")
    return value


def _registered_layer(name: str, value: Any) -> str:
    """``value`` if it names a layer of the registry (which may grow)."""
    layers = importlib.import_module(".layers", __package__).LAYERS
    return _validation("check_choice", choices=layers)(name, value)


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

    layer: str = _field("s4d", "SSM layer", _registered_layer, choices=LAYER_NAMES)
    block: str = _field("residual", "the block around each SSM layer: residual (norm, layer, "
                                    "GELU, dropout, GLU, as S4), mamba (Mamba's block around "
                                    "s6) or mamba2 (Mamba-2's block around ssd)", choices=BLOCKS)
    d_model: int = _field(64, "channels H inside the blocks", POSITIVE_INT)
    n_layers: int = _field(4, "number of residual blocks", _layer_count)
    state_size: int = _field(64, "state size N of each SSM layer", POSITIVE_INT)
    norm: str = _field("layer", "pre-norm of each block", choices=NORMS)
    glu: bool = _field(True, "gated linear unit after the SSM (else a plain Linear)", BOOL)
    dropout: float = _field(0.0, "dropout rate after each SSM's GELU, in [0, 1)", FRACTION)
    bidirectional: bool = _field(False, "bidirectional layers (classification only)", BOOL)
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
        _check_fields(self)
        if self.block != "residual":
            self._check_mamba_block()
        parameters = self.layer_parameters()
        # The layers' own check (real, normal in float32, where log Δ is stored; step_min <=
        # step_max), now, with a bound left as None standing for the layer's default.
        step_min, step_max = (parameters[n].default if getattr(self, n) is None
                              else getattr(self, n) for n in ("step_min", "step_max"))
        step_min, step_max = importlib.import_module("._validation", __package__
                                                     ).check_step_bounds(step_min, step_max)
        for name, value in (("step_min", step_min), ("step_max", step_max)):
            if getattr(self, name) is not None:
                object.__setattr__(self, name, value)
        self._check_layer_options(parameters)

    def _check_mamba_block(self) -> None:
        """A Mamba block runs its own SSM, is causal and has its own gate."""
        layer = MAMBA_LAYERS[self.block]
        if self.layer != layer:
            raise ValueError(f"block={self.block!r} runs {layer!r} inside it: give layer={layer!r} "
                             f"(got layer={self.layer!r}).")
        for name, allowed in (("bidirectional", False), ("dropout", 0.0), ("glu", True)):
            if getattr(self, name) != allowed:
                raise ValueError(f"{name}={getattr(self, name)!r} applies to block='residual' "
                                 f"only: block={self.block!r} is causal and has its own gate, "
                                 f"with no dropout; leave {name} at {allowed!r}.")

    def layer_parameters(self) -> dict[str, inspect.Parameter]:
        """The parameters of what each block builds (the layer, or the Mamba block), by name
        (``self`` left out)."""
        layers = importlib.import_module(".layers", __package__)
        built = (__getattr__("MAMBA_BLOCKS")[self.block] if self.block != "residual"
                 else layers.get_layer(self.layer))
        parameters = dict(inspect.signature(built.__init__).parameters)
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
        _validation("check_choice", choices=TASKS)("task", task)
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

    epochs: int = _field(10, "passes over the training set (after the validation split)",
                         POSITIVE_INT)
    batch_size: int = _field(64, "global batch size (split over the devices; divisible by their "
                                 "number)", POSITIVE_INT)
    lr: float = _field(4e-3, "peak learning rate of the ordinary parameters (AdamW)", NON_NEGATIVE)
    ssm_lr: float = _field(1e-3, "peak learning rate of the SSM parameters (Adam, no weight "
                                 "decay)", NON_NEGATIVE)
    weight_decay: float = _field(0.05, "AdamW decoupled weight decay of the ordinary parameters",
                                 NON_NEGATIVE)
    warmup_fraction: float = _field(0.1, "share of the optimiser updates spent warming the "
                                         "learning rate up from 0, in [0, 1)", FRACTION)
    seed: int = _field(0, "seed of the initialisation, the validation split and the shuffling "
                          "(epoch e: seed + e)", _validation("check_seed"))
    max_steps: int | None = _field(None, "budget of optimiser updates: stop (and end the "
                                         "schedule) after this many", POSITIVE_INT)
    validation_fraction: float = _field(0.1, "share of the training set held out for "
                                             "validation, in [0, 1); 0: no validation", FRACTION)
    keep_best: bool = _field(True, "at the end, keep the weights of the epoch with the best "
                                   "validation score", BOOL)
    eval_batch_size: int = _field(500, "batch size of evaluation", POSITIVE_INT)
    progress: bool = _field(True, "show a progress bar per epoch on a terminal and keep a line "
                                  "per epoch (loss, validation, time)", BOOL)
    save_every_steps: int | None = _field(None, "with a checkpoint folder: save the training "
                                                "state after every this many optimiser updates "
                                                "(also after the first, at each new best epoch, "
                                                "on a signal and at the end)", POSITIVE_INT)
    save_every_minutes: float | None = _field(10.0, "with a checkpoint folder: save the training "
                                                    "state when this many minutes have passed "
                                                    "since the last save", _validation(
                                                        "check_real_in", low=0.0, open_low=True))

    RESUME_IRRELEVANT = ("progress", "save_every_steps", "save_every_minutes", "eval_batch_size")
    """Fields a resumed run may change: they do not change what is trained."""

    def __post_init__(self):
        _check_fields(self)
