"""The command line: train one model on one data set, with checkpoints and ``--resume``.

    python -m annotated_ssm.cli --layer s4d --dataset mnist1d --epochs 20 --checkpoint runs/s4d
    python -m annotated_ssm.cli ... --checkpoint runs/s4d --resume   # after Ctrl-C
    python -m annotated_ssm.cli --help

(also installed as ``annotated-ssm-train``). Its options are the fields of ``ModelConfig`` and ``TrainConfig`` (``annotated_ssm.config``),
with their help texts and defaults. Everything that can be checked without the data is
checked before it is loaded, by the configs' own checks: the values, the layer options'
names against the layer's signature, the options against the data set's task, a lower bound
of the model's size against the memory, the run folder, and with ``--resume`` that the
options are the saved run's; what needs the data's size (a batch larger than the training
split) right after loading. SIGINT (Ctrl-C) and SIGTERM save the training state first (exit
status 130 and 143).
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import json
import math
import os
import pathlib
import signal
import sys
import typing
from typing import Any

import jax

from .config import ModelConfig, TrainConfig
from .data import DATASET_TASKS, DATASETS, load_dataset
from .model import count_dense_params
from .runs import BEST, LAST, TrainingInterrupted, check_resume, check_run_folder
from .train import DivergedError, build_model, count_params, count_steps, fit

__all__ = ["main"]


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors: ``error: …`` on stderr, exit status 2."""

    def error(self, message):
        self.exit(2, f"error: {message} (see --help)\n")


def _parse_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number; got {text!r}")
    return value


_parse_float.__name__ = "number"  # argparse names the type in its messages


def _add_fields(parser: argparse.ArgumentParser, config_class: type) -> None:
    """One option per dataclass field: ``--field-name``, its type, default and help text."""
    group = parser.add_argument_group(f"{config_class.__name__} (annotated_ssm.config)")
    hints = typing.get_type_hints(config_class)
    defaults = config_class()
    for field in dataclasses.fields(config_class):
        kind = hints[field.name]
        default = getattr(defaults, field.name)
        help = field.metadata["help"]
        if field.name == "layer_options":
            group.add_argument("--layer-option", dest=field.name, action="append", default=[],
                               metavar="KEY=VALUE",
                               help=f"{help}; repeatable, e.g. --layer-option init=rand")
            continue
        flag = "--" + field.name.replace("_", "-")
        if kind is bool:
            group.add_argument(flag, dest=field.name, action=argparse.BooleanOptionalAction,
                               default=default, help=help)
            continue
        base = next((t for t in typing.get_args(kind) if t is not type(None)), kind)  # X|None: X
        parse = _parse_float if base is float else base
        group.add_argument(flag, dest=field.name, type=parse, default=default, help=help,
                           choices=field.metadata.get("choices"),
                           metavar=None if field.metadata.get("choices") else field.name.upper())


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="python -m annotated_ssm.cli",
        description="Train a deep SSM (S4, DSS, S4D, S5 or S6 blocks) on a sequence dataset. The "
                    "options in the groups ModelConfig and TrainConfig are the fields of those "
                    "dataclasses, with their defaults.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--dataset", default="mnist1d", choices=tuple(DATASETS),
                        help="dataset (smnist and scifar are downloaded once; the others are "
                             "generated locally)")
    parser.add_argument("--checkpoint", type=pathlib.Path, default=None, metavar="DIR",
                        help="a run folder: the training state is saved to DIR/last (after the "
                             "first update, periodically, on SIGINT/Ctrl-C or SIGTERM, and at the "
                             "end) and the best epoch's model to DIR/best; checked before training")
    parser.add_argument("--resume", action="store_true",
                        help="continue the run saved in --checkpoint DIR, with the same options")
    _add_fields(parser, ModelConfig)
    _add_fields(parser, TrainConfig)
    return parser


def _layer_options(items: list[str]) -> dict[str, Any]:
    """Parse ["init=rand", "blocks=4"] into {"init": "rand", "blocks": 4} (Python literals, else
    strings)."""
    options = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.isidentifier():
            raise ValueError(f"--layer-option must look like KEY=VALUE; got {item!r}.")
        try:
            options[key] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            options[key] = value
    return options


def _configs(args: argparse.Namespace) -> tuple[ModelConfig, TrainConfig]:
    """The two configurations from the parsed arguments (checked by the dataclasses)."""
    values = vars(args)
    model_values = {f.name: values[f.name] for f in dataclasses.fields(ModelConfig)}
    model_values["layer_options"] = _layer_options(values["layer_options"])
    train = TrainConfig(**{f.name: values[f.name] for f in dataclasses.fields(TrainConfig)})
    return ModelConfig(**model_values), train


def _device_memory() -> int | None:
    """The memory of the first device (its limit for a GPU, the machine's RAM for a CPU)."""
    try:
        stats = jax.local_devices()[0].memory_stats() or {}
        return int(stats.get("bytes_limit") or os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return None


def _check_model_size(config: ModelConfig, d_input: int, d_output: int) -> None:
    """ValueError if training ``config``'s model cannot fit the device's memory, by a lower
    bound of its parameters: the dense layers (``count_dense_params``) and, per block, the SSM
    layer's own (each layer holds at least an H × N output matrix C)."""
    n_params = (count_dense_params(config, d_input, d_output)
                + config.n_layers * config.d_model * config.state_size)
    needed, memory = 4 * 4 * n_params, _device_memory()  # float32 weights, gradients, 2 moments
    if memory is not None and needed > memory:
        raise ValueError(f"d_model={config.d_model}, n_layers={config.n_layers}, state_size="
                         f"{config.state_size} make a model of more than {n_params:,} parameters: "
                         f"training needs at least {needed / 2**30:,.1f} GiB, and this device has "
                         f"{memory / 2**30:,.1f} GiB.")


def _check_before_loading(model_config: ModelConfig, config: TrainConfig, dataset: str,
                          checkpoint: pathlib.Path | None, resume: bool) -> None:
    """What the configs' checks cannot know without the command's other options: the model
    against the data set's task, its size against the memory, the run folder (every name a
    save creates), and with ``resume`` that the saved run used the same options."""
    model_config.check_task(DATASET_TASKS[dataset])
    n_outputs = 1 if DATASET_TASKS[dataset] == "regression" else 2  # at least
    _check_model_size(model_config, 1, n_outputs)
    if resume and checkpoint is None:
        raise ValueError("--resume needs --checkpoint DIR, the run folder to continue.")
    if checkpoint is not None:
        path = check_run_folder(checkpoint, resume=resume)
        if resume:
            check_resume(path, config, model_config.to_dict(), dataset)


_JAX_ERRORS = tuple(e for e in (getattr(jax.errors, "JaxRuntimeError", None),) if e is not None)


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m annotated_ssm.cli`` and ``annotated-ssm-train``.

    Exit status 0 on success; 2 (one line ``error: …``) for an invalid argument or
    checkpoint folder, found before any data is loaded or anything compiled (a value a
    layer refuses, e.g. an unknown S4D ``init``, when the model is built, after loading);
    the same for a batch larger than the training split, found when the data is loaded; 1
    when a run fails later (a download, a diverged loss, memory); 130 on SIGINT (Ctrl-C) and
    143 on SIGTERM, after saving the training state to ``--checkpoint DIR/last`` (``--resume``
    continues it).
    """
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        model_config, config = _configs(args)
        _check_before_loading(model_config, config, args.dataset, args.checkpoint, args.resume)
    except (ValueError, TypeError, OSError) as error:
        parser.exit(2, f"error: {error}\n")
    try:
        dataset = load_dataset(args.dataset)
        try:
            total_steps = count_steps(config, dataset)  # the batch against the training split
        except ValueError as error:
            parser.exit(2, f"error: {error}\n")
        try:
            model = build_model(model_config, dataset, seed=config.seed)
        except (ValueError, TypeError) as error:  # an option value the layer refuses
            parser.exit(2, f"error: layer {model_config.layer!r} refuses its options: {error}\n")
        print(f"{dataset}\n{model_config.layer}: {count_params(model):,} parameters on "
              f"{len(jax.local_devices())} device(s), {total_steps} "
              "optimiser updates", flush=True)
        history = fit(model, dataset, config, checkpoint=args.checkpoint,
                      resume_from=args.checkpoint if args.resume else None)
        summary = {"layer": model_config.layer, "dataset": args.dataset,
                   "epochs": len(history.epoch),
                   "steps": history.steps[-1], "best_epoch": history.best_epoch,
                   "test_loss": round(history.test_loss, 4),
                   "seconds_per_epoch": round(history.seconds_per_epoch, 2)}
        if dataset.task == "classification":
            summary["test_accuracy"] = round(history.test_accuracy, 4)
            summary["val_accuracy"] = [round(v, 4) for v in history.val_accuracy]
        if history.stopped:
            summary["stopped"] = history.stopped
        if args.checkpoint is not None:
            folder = args.checkpoint.absolute()
            summary["checkpoint"] = str(folder / LAST)
            if (folder / BEST).exists():
                summary["best"] = str(folder / BEST)
    except TrainingInterrupted as stopped:
        parser.exit(128 + stopped.signal, f"interrupted by {signal.Signals(stopped.signal).name} "
                    f"at update {stopped.step}; the training state is saved in "
                    f"{str(stopped.path / LAST)!r}: continue with the same command and --resume.\n")
    except KeyboardInterrupt:
        parser.exit(130, "error: interrupted; nothing was saved (give --checkpoint DIR to save the "
                         "training state).\n")
    except (ValueError, OSError, DivergedError, *_JAX_ERRORS) as error:
        message = " ".join(str(error).split())  # one line, even for XLA's multi-line messages
        parser.exit(1, f"error: {message[:2000]}\n")
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
