"""The command line: train one model on one data set, with checkpoints and ``--resume``.

    annotated-ssm-train --layer s4d --dataset mnist1d --epochs 20 --checkpoint runs/s4d
    annotated-ssm-train --resume runs/s4d              # after Ctrl-C: the stored options
    annotated-ssm-train --resume runs/s4d --epochs 30  # extend a run
    annotated-ssm-train --help

(also ``python -m annotated_ssm.cli``). Its options are the fields of ``ModelConfig`` and ``TrainConfig`` (``annotated_ssm.config``),
with their help texts and defaults. Everything that can be checked without the data is
checked before it is loaded, by the configs' own checks: the values, the layer options'
names against the layer's signature, the options against the data set's task, a lower bound
of the model's size against the memory, the run folder, and with ``--resume`` that the
options are the saved run's; what needs the data's size (a batch larger than the training
split) right after loading. SIGINT (Ctrl-C), SIGTERM and SIGHUP save the training state
and stop (exit status 130, 143, 129); SIGUSR1 saves and trains on. A folder that holds a run
is never replaced unless ``--overwrite``; one process at a time trains in it.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import dataclasses
import json
import math
import pathlib
import shlex
import signal
import sys
import typing
from typing import Any

from .config import LAYER_NAMES, ModelConfig, TrainConfig

__all__ = ["main"]

# JAX, the data and the training are imported when a command needs them: --help needs none.


def load_dataset(name: str, **kwargs):
    """:func:`annotated_ssm.data.load_dataset` (the tests replace it here)."""
    from .data import load_dataset
    return load_dataset(name, **kwargs)


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
    for field in dataclasses.fields(config_class):
        kind, default = hints[field.name], field.default  # (no instance: its checks import JAX)
        help = field.metadata["help"]
        if field.name == "layer_options":
            group.add_argument("--layer-option", dest=field.name, action="append", default=[],
                               metavar="KEY=VALUE",
                               help="an option of the layer's own (its constructor's keywords), "
                                    "e.g. --layer-option init=lin for s4d or --layer-option "
                                    "blocks=4 for s5; repeatable; the value is read as a Python "
                                    "literal, else as a string (default: none)")
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


PROG = "annotated-ssm-train"

DATASET_HELP = {
    "mnist1d": "MNIST-1D, 4000/1000 sequences of 40 steps, 10 classes (generated locally)",
    "digits": "scikit-learn's 8x8 digits read pixel by pixel, 64 steps, 10 classes",
    "digits_ar": "the digits as next-row regression (8 steps of 8 pixels), for generation",
    "mnist1d_long": "an MNIST-1D digit followed by noise up to 1024 steps: long memory",
    "smnist": "sequential MNIST, 784 steps (downloads 11 MB once; a GPU run)",
    "scifar": "sequential CIFAR-10, 1024 steps of RGB (downloads 163 MB once; a GPU run)",
}

EXAMPLES = f"""\
data sets (--dataset):
{chr(10).join(f"  {name:<13} {help}" for name, help in DATASET_HELP.items())}
  FILE.npz      your own: x_train, y_train, x_test, y_test (and lengths_train,
                lengths_test for sequences of different lengths padded to one L),
                as annotated_ssm.data.load_npz reads them
  digits and digits_ar need the book's extra (scikit-learn):
  pip install "annotated-ssm[book]".

examples:
  {PROG} --layer s4d --epochs 20 --checkpoint runs/s4d
  {PROG} --resume runs/s4d                 continue after Ctrl-C (the stored options)
  {PROG} --resume runs/s4d --epochs 30     train a run on to 30 epochs
  {PROG} --layer s5 --layer-option blocks=4 --dataset digits --checkpoint runs/s5
  {PROG} --layer s6 --block mamba --dataset digits   Mamba's blocks (s6 inside)
  {PROG} --layer ssd --block mamba2 --dataset digits  Mamba-2's blocks (ssd inside)
  {PROG} --layer s4d --checkpoint runs/s4d --overwrite   replace that run

A run folder holds orbax's numbered saves (the newest and the best epoch's),
history.json and history.csv (a row per epoch) and a lock: one process at a time trains
in it. A folder that holds a run is never replaced unless --overwrite, which removes what a
run created there and refuses a folder holding anything else. SIGINT (Ctrl-C), SIGTERM and
SIGHUP save and stop; SIGUSR1 saves and trains on. --resume DIR takes the options stored in DIR; an option given
with it must equal the stored one, except --epochs, which may grow: the warm-up + cosine
learning-rate schedule is then recomputed for the new number of updates and training goes on
from the saved update on it (without --epochs a resumed run equals the uninterrupted one,
bit for bit).
"""


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter,
                     argparse.RawDescriptionHelpFormatter):
    """Defaults after each option's help; the description and examples as written."""

    def _get_help_string(self, action):
        if action.dest == "layer_options":  # its help says its default in words
            return action.help
        return super()._get_help_string(action)


def _parser() -> argparse.ArgumentParser:
    layers = ", ".join(name.upper() for name in LAYER_NAMES)
    parser = _Parser(
        prog=PROG,
        description=f"Train a deep state-space model (blocks of one layer: {layers})\n"
                    "on a sequence data set; save it, resume it, extend it. The options in the\n"
                    "groups ModelConfig and TrainConfig are the fields of those dataclasses\n"
                    "(annotated_ssm.config), with their defaults.",
        epilog=EXAMPLES,
        formatter_class=_HelpFormatter,
    )
    parser.add_argument("--dataset", default="mnist1d", type=_dataset_name,
                        metavar="{" + ",".join(DATASET_HELP) + ",FILE.npz}",
                        help="the data set (explained below)")
    parser.add_argument("--checkpoint", type=pathlib.Path, default=None, metavar="DIR",
                        help="a run folder: the training state is saved there (after the first "
                             "update, periodically, at each new best epoch, on a signal, and at "
                             "the end), the history to DIR/history.json and .csv; checked "
                             "before training")
    parser.add_argument("--resume", type=pathlib.Path, default=None, metavar="DIR",
                        help="continue the run saved in DIR with its stored options (a "
                             "larger number of epochs extends it)")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace the run in --checkpoint DIR (its saves and history files; "
                             "a folder holding anything else is refused)")
    parser.add_argument("--json", action="store_true",
                        help="print the result as one JSON line instead of a summary")
    _add_fields(parser, ModelConfig)
    _add_fields(parser, TrainConfig)
    return parser


def _dataset_name(value: str) -> str:
    """A registered data set's name, or an .npz file's absolute path (what a run stores)."""
    from .data import DATASETS
    if value.endswith(".npz"):
        path = pathlib.Path(value).absolute()
        if not path.is_file():
            raise argparse.ArgumentTypeError(f"no such file: {str(path)!r}")
        return str(path)
    if value not in DATASETS:
        raise argparse.ArgumentTypeError(f"invalid choice: {value!r} (choose from "
                                         f"{', '.join(DATASETS)}, or give a FILE.npz)")
    return value


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


def _given_options(argv: list[str] | None) -> set[str]:
    """The destinations of the options given on the command line (not left at a default)."""
    parser = _parser()
    for action in parser._actions:  # argparse's own list: an option left out is then absent
        action.default = argparse.SUPPRESS
    return set(vars(parser.parse_args(argv)))


def _configs(args: argparse.Namespace, argv: list[str] | None
             ) -> tuple[ModelConfig, TrainConfig, Any]:
    """The two configurations from the parsed arguments (checked by the dataclasses); with
    ``--resume DIR`` (read once), the options stored in DIR where none is given
    (``args.dataset`` too), checked against the saved run, whose state and epochs come third
    (else None). Sets ``args.checkpoint`` to the ``--resume`` folder."""
    from .data import DATASETS
    from .runs import RunFolder
    if args.resume is not None:
        if args.checkpoint is not None and args.checkpoint.absolute() != args.resume.absolute():
            raise ValueError("--resume DIR continues the run in DIR and saves it there; leave "
                             f"out --checkpoint (given {str(args.checkpoint)!r}).")
        if args.overwrite:
            raise ValueError("--resume continues a run, --overwrite replaces it: give one.")
        args.checkpoint = args.resume
    if args.overwrite and args.checkpoint is None:
        raise ValueError("--overwrite needs --checkpoint DIR, the run folder to replace.")
    values = dict(vars(args))
    values["layer_options"] = _layer_options(values["layer_options"])
    if args.resume is None:
        return (ModelConfig(**{f.name: values[f.name] for f in dataclasses.fields(ModelConfig)}),
                TrainConfig(**{f.name: values[f.name] for f in dataclasses.fields(TrainConfig)}),
                None)
    given = _given_options(argv)
    with RunFolder(args.resume, TrainConfig(), resume=True, dry_run=True) as folder:
        info, state = folder.read_metadata(), folder.read_state()
        stored = {**info["architecture"], **(info.get("train_config") or {})}
        values.update({k: v for k, v in stored.items() if k not in given and k in values})
        if "layer_options" in given:  # the package's own (S4's reference length) stay stored
            values["layer_options"] = {**stored["layer_options"], **values["layer_options"]}
        if "dataset" not in given:
            args.dataset = state.dataset["name"]
            if args.dataset.endswith(".npz") and not pathlib.Path(args.dataset).is_file():
                raise ValueError(f"the run in {str(args.resume)!r} was trained on the file "
                                 f"{args.dataset!r}, which is gone; put it back there to resume "
                                 "the run (its name and contents are part of the run).")
            if args.dataset not in DATASETS and not args.dataset.endswith(".npz"):
                raise ValueError(f"the run in {str(args.resume)!r} was trained on the data set "
                                 f"{args.dataset!r}, which the command line cannot load; resume "
                                 "it from Python with fit(..., resume_from=DIR).")
        model = ModelConfig(**{f.name: values[f.name] for f in dataclasses.fields(ModelConfig)})
        train = TrainConfig(**{f.name: values[f.name] for f in dataclasses.fields(TrainConfig)})
        folder.check_resume(train, model.to_dict(), args.dataset)
    return model, train, (state, stored["epochs"])


def _check_before_loading(model_config: ModelConfig, config: TrainConfig,
                          args: argparse.Namespace) -> None:
    """What the configs' checks cannot know without the command's other options: the data
    set's module installed, the model against the data set's task, its size against the
    memory, a new run's folder (free, and every name a save creates)."""
    from .data import check_dataset_installed, dataset_task
    from .model import check_model_fits
    from .runs import RunFolder
    check_dataset_installed(args.dataset)
    task = dataset_task(args.dataset)
    model_config.check_task(task)
    n_outputs = 1 if task == "regression" else 2  # at least
    check_model_fits(model_config, 1, n_outputs, copies=4)  # weights, gradients, 2 moments
    if args.checkpoint is not None and args.resume is None:
        RunFolder(args.checkpoint, config, overwrite=args.overwrite, dry_run=True).close()


def _resume_message(config: TrainConfig, resumed, per_epoch: int, total_steps: int) -> str:
    """What resuming a run does (``resumed``: its saved state and epochs, ``per_epoch``: its
    updates per epoch)."""
    (state, stored_epochs), message = resumed, ""
    if config.epochs > stored_epochs:
        message = (f"extending the run from {stored_epochs} to {config.epochs} epochs: the "
                   f"learning-rate schedule is recomputed for {total_steps} updates.\n")
    epoch = min(state.step // per_epoch + 1, config.epochs)  # the epoch under way, or the next
    return message + f"resuming from update {state.step} (epoch {epoch} of {config.epochs})"


def _summary_lines(summary: dict[str, Any], folder: pathlib.Path | None) -> list[str]:
    """A few lines a person reads at the end of a run (``folder``: the run folder as given)."""
    lines = [f"finished: {summary['layer']} on {summary['dataset']}, {summary['epochs']} epochs, "
             f"{summary['steps']} updates ({summary['seconds_per_epoch']} s per epoch)"
             + (f"; stopped by the {summary['stopped']}" if "stopped" in summary else "")]
    test = f"test loss {summary['test_loss']}"
    if "test_accuracy" in summary:
        test = f"test accuracy {summary['test_accuracy']}, " + test
    lines.append(f"best epoch {summary['best_epoch']}: {test}")
    if folder is not None:
        lines.append(f"saved in {str(folder)!r}: the best epoch and the last training state, "
                     "history.json, history.csv")
    return lines


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m annotated_ssm.cli`` and ``annotated-ssm-train``.

    Exit status 0 on success; 2 (one line ``error: …``) for an invalid argument or
    checkpoint folder, found before any data is loaded or anything compiled (a value a
    layer refuses, e.g. an unknown S4D ``init``, when the model is built, after loading);
    the same for a batch larger than the training split, found when the data is loaded; 1
    when a run fails later (a download, a diverged loss, memory); 130 on SIGINT (Ctrl-C) and
    143 on SIGTERM, after saving the training state to ``--checkpoint DIR`` (``--resume``
    continues it).
    """
    parser = _parser()
    args = parser.parse_args(argv)
    import jax

    from .train import (DivergedError, Signals, TrainingInterrupted, build_model, count_params,
                        count_steps, fit)
    try:
        model_config, config, resumed = _configs(args, argv)
        _check_before_loading(model_config, config, args)
    except (ValueError, TypeError, OSError, ImportError) as error:
        parser.exit(2, f"error: {error}\n")
    if resumed and resumed[0].finished and config.epochs <= resumed[1]:  # nothing to load
        print(f"the run in {str(args.resume)!r} is finished ({resumed[0].step} updates, "
              f"{resumed[1]} epochs); nothing to train. Give --epochs larger than "
              f"{resumed[1]} to extend it.")
        return 0
    try:
        with _raising_on(*Signals.STOPPING):  # no JAX call yet: safe to raise
            dataset = load_dataset(args.dataset)
    except KeyboardInterrupt as stopped:
        signum = getattr(stopped, "signal", signal.SIGINT)
        parser.exit(128 + signum, f"interrupted by {signal.Signals(signum).name} while loading the "
                                  "data; nothing to save yet: run the same command again.\n")
    try:
        total_steps = count_steps(config, dataset)  # the batch against the training split
    except ValueError as error:
        parser.exit(2, f"error: {error}\n")
    try:
        with Signals() as signals:  # from here on JAX compiles: signals only set a flag
            try:
                model = build_model(model_config, dataset, seed=config.seed)
            except (ValueError, TypeError) as error:  # an option value the layer refuses
                parser.exit(2, f"error: layer {model_config.layer!r} refuses its options: "
                               f"{error}\n")
            print(f"{dataset}\n{model_config.layer}: {count_params(model):,} parameters on "
                  f"{len(jax.local_devices())} device(s), {total_steps} optimiser updates",
                  flush=True)
            if args.resume is not None:
                per_epoch = count_steps(dataclasses.replace(config, epochs=1, max_steps=None),
                                        dataset)
                print(_resume_message(config, resumed, per_epoch, total_steps), flush=True)
            if signals.stop:
                parser.exit(128 + signals.stop, f"interrupted by "
                            f"{signal.Signals(signals.stop).name} before the first update; "
                            "nothing to save yet: run the same command again.\n")
            try:
                history = fit(model, dataset, config, checkpoint=args.checkpoint,
                              resume_from=args.resume, overwrite=args.overwrite)
            except TrainingInterrupted as stopped:  # said while signals still set a flag
                where = ("nothing was saved (give --checkpoint DIR to save the training state)"
                         if stopped.path is None else f"the training state is saved in "
                         f"{str(stopped.path)!r}. Continue with: {PROG} --resume "
                         f"{shlex.quote(str(stopped.path))}")
                parser.exit(128 + stopped.signal, f"interrupted by "
                            f"{signal.Signals(stopped.signal).name} at update {stopped.step}; "
                            f"{where}\n")
    except (ValueError, OSError, DivergedError, jax.errors.JaxRuntimeError) as error:
        message = " ".join(str(error).split())  # one line, even for XLA's multi-line messages
        parser.exit(1, f"error: {message[:2000]}\n")
    summary = {"layer": model_config.layer, "dataset": args.dataset, "epochs": len(history.epoch),
               "steps": history.steps[-1], "best_epoch": history.best_epoch,
               "test_loss": round(history.test_loss, 4),
               "seconds_per_epoch": round(history.seconds_per_epoch, 2)}
    if dataset.task == "classification":
        summary["test_accuracy"] = round(history.test_accuracy, 4)
        summary["val_accuracy"] = [round(v, 4) for v in history.val_accuracy]
    if history.stopped:
        summary["stopped"] = history.stopped
    if args.checkpoint is not None:
        summary["checkpoint"] = str(args.checkpoint.absolute())
    print(json.dumps(summary) if args.json else "\n".join(_summary_lines(summary, args.checkpoint)))
    return 0


@contextlib.contextmanager
def _raising_on(*signals):
    """``signals`` raise KeyboardInterrupt (its ``signal`` the number) meanwhile, like Ctrl-C."""
    def handler(signum, frame):
        stopped = KeyboardInterrupt()
        stopped.signal = signum
        raise stopped
    previous = {s: signal.signal(s, handler) for s in signals}
    try:
        yield
    finally:
        for s, old in previous.items():
            signal.signal(s, old)


if __name__ == "__main__":
    sys.exit(main())
