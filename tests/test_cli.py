"""The command line ``annotated-ssm-train`` (``python -m annotated_ssm.cli``): options
generated from the config dataclasses (help and default for each), every bad argument and
checkpoint path rejected with one line ``error: …`` and exit status 2 before any data is
loaded, a run folder never replaced without --overwrite, --resume DIR with the stored
options (and more epochs), the history files, a diverged run that never overwrites a good
checkpoint, a real run that saves a loadable checkpoint, and the core install (without the
book's extra) answering the default command with one line."""

import csv
import dataclasses
import json
import os
import subprocess
import sys

import pytest
from test_package_layout import BLOCK_IMPORTS, BOOK_LIBRARIES

from annotated_ssm import cli, train
from annotated_ssm.checkpoint import load_model, read_checkpoint_info
from annotated_ssm.config import ModelConfig, TrainConfig
from annotated_ssm.data import DATASET_NEEDS, DATASETS, Dataset, load_dataset
from annotated_ssm.cli import main
from annotated_ssm.layers import LAYERS
from annotated_ssm.train import evaluate

SMALL = ["--layer", "s4d", "--d-model", "8", "--n-layers", "1", "--state-size", "4", "--step-max", "1",
         "--no-progress"]
pytestmark = pytest.mark.usefixtures("frozen_heap")  # tests/conftest.py: saves collect garbage


@pytest.fixture
def no_data(monkeypatch):
    """Fail the test if the command loads a data set."""

    def refuse(name, **kwargs):
        raise AssertionError(f"the command loaded the data set {name!r} before rejecting its "
                             "arguments")

    monkeypatch.setattr(cli, "load_dataset", refuse)


@pytest.fixture
def tiny_digits(monkeypatch):
    """Make the command train on 200 digits (fast), or on a poisoned copy."""
    full = load_dataset("digits")
    small = Dataset("digits", full.x_train[:200], full.y_train[:200], full.x_test[:50], full.y_test[:50],
                    "classification", 10)
    monkeypatch.setattr(cli, "load_dataset", lambda name, **kwargs: small)
    return small


def run(argv, capsys):
    """main(argv) → (exit status, stdout, stderr)."""
    try:
        status = main(argv)
    except SystemExit as exit_:
        status = exit_.code
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_every_config_field_is_an_option_with_help_and_default(capsys):
    status, help_text, _ = run(["--help"], capsys)
    assert status == 0
    flat = " ".join(help_text.split())
    for config in (ModelConfig, TrainConfig):
        defaults = config()
        for field in dataclasses.fields(config):
            flag = "--layer-option" if field.name == "layer_options" else "--" + field.name.replace("_", "-")
            # the option's entry: from its flag to the next "(default: …)"
            entry = flat.split(f" {flag}", 1)[1].split("(default: ", 1)
            assert len(entry) == 2, flag
            if field.name == "layer_options":  # its own help: KEY=VALUE, not a dict
                assert "--layer-option init=lin for s4d" in entry[0] and entry[1].startswith("none)")
                continue
            help_words = " ".join(field.metadata["help"].split())
            assert help_words in entry[0], (flag, help_words)
            assert entry[1].startswith(f"{getattr(defaults, field.name)})"), (flag, entry[1][:20])
    assert flat.startswith("usage: annotated-ssm-train ")
    assert f"blocks of one layer: {', '.join(name.upper() for name in LAYERS)})" in flat
    for name in DATASETS:  # each data set explained, in the epilog
        assert f" {name} {' '.join(cli.DATASET_HELP[name].split())}" in flat, name
    assert "examples: annotated-ssm-train --layer s4d" in flat
    assert "annotated-ssm-train --resume runs/s4d --epochs 30" in flat
    assert "the warm-up + cosine learning-rate schedule is then recomputed" in flat
    assert "time-budget" not in flat and "SIGTERM" in flat and "--overwrite" in flat


def test_help_imports_no_jax_and_names_every_layer_and_data_set():
    # the help is built from the configs' fields and the names below, without JAX: it answers
    # at once (the names are the registries', as the first two lines check)
    assert cli.LAYER_NAMES == tuple(LAYERS) and tuple(cli.DATASET_HELP) == tuple(DATASETS)
    code = ("import sys\nfrom annotated_ssm.cli import main\ntry:\n    main(['--help'])\n"
            "except SystemExit:\n    pass\nassert 'jax' not in sys.modules, 'jax imported'\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0 and "usage: annotated-ssm-train" in done.stdout, done.stderr


@pytest.mark.parametrize("argv, message", [
    (["--lr", "nan"], "argument --lr: must be a finite number; got 'nan'"),
    (["--ssm-lr", "inf"], "argument --ssm-lr: must be a finite number"),
    (["--warmup-fraction", "5"], r"warmup_fraction must be a finite number in [0.0, 1.0); got 5.0"),
    (["--epochs", "0"], "epochs must be an integer >= 1; got 0"),
    (["--epochs", "abc"], "argument --epochs: invalid int value: 'abc'"),
    (["--max-steps", "-1"], "max_steps must be an integer >= 1; got -1"),
    (["--validation-fraction", "1"], "validation_fraction must be a finite number in [0.0, 1.0)"),
    (["--dropout", "-0.1"], "dropout must be a finite number in [0.0, 1.0)"),
    (["--step-min", "0.5", "--step-max", "0.1"], "step_min must be <= step_max"),
    (["--time-budget", "60"], "unrecognized arguments: --time-budget 60"),
    (["--layer", "lstm"], "argument --layer: invalid choice: 'lstm'"),
    (["--dataset", "imagenet"], "invalid choice: 'imagenet'"),
    (["--dataset", "digits_ar", "--bidirectional"], "bidirectional=True does not apply to a "
                                                    "regression"),
    (["--dataset", "digits_ar", "--pooling", "last"], "pooling='last' does not apply to a "
                                                      "regression"),
    (["--layer-option", "oops"], "KEY=VALUE; got 'oops'"),
    (["--layer-option", "no_such_option=1"], "layer 's4d' takes no option 'no_such_option'; its "
                                             "options: init, init_options"),
    (["--layer", "s5", "--layer-option", "init=lin"], "layer 's5' takes no option 'init'"),
    (["--layer-option", "step_min=0.1"], "layer_options may not set ['step_min']"),
    (["--checkpoint", "."], "is the current directory or contains it"),
    (["--overwrite"], "--overwrite needs --checkpoint DIR"),
])
def test_bad_arguments_are_one_line_errors_before_any_data(argv, message, capsys, no_data):
    status, out, err = run(argv, capsys)
    assert status == 2 and out == ""
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert message in err


def test_bad_checkpoint_paths_are_rejected_before_any_data(tmp_path, capsys, no_data):
    (tmp_path / "folder").mkdir()
    (tmp_path / "folder" / "data.csv").write_text("1,2")
    (tmp_path / "file").write_text("x")
    for path, message in ((tmp_path / "folder", "holds files that are not a run folder's "
                                                "(['data.csv'])"),
                          (tmp_path / "file", "exists and is not a directory"),
                          (tmp_path / "file" / "ckpt", "is not a directory"),
                          ("/proc/annotated_ssm_checkpoint", "'/proc' is not writable")):
        status, _, err = run(["--checkpoint", str(path)], capsys)
        assert status == 2 and err.startswith("error: ") and err.count("\n") == 1 and message in err, err
    assert (tmp_path / "folder" / "data.csv").read_text() == "1,2" and (tmp_path / "file").read_text() == "x"


def test_an_unwritable_checkpoint_fails_at_once_in_a_real_process(tmp_path):
    (tmp_path / "file").write_text("x")
    done = subprocess.run([sys.executable, "-m", "annotated_ssm.cli", "--checkpoint",
                           str(tmp_path / "file" / "c")],
                          capture_output=True, text=True, timeout=120, env=dict(os.environ, JAX_PLATFORMS="cpu"))
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith("error: cannot save a "
                                  "run folder at") and done.stderr.count("\n") == 1


def test_a_diverged_run_names_the_update_and_keeps_the_good_checkpoint(tmp_path, capsys, tiny_digits):
    # lr 1e30: the weights are huge after one update (saved: the early save), the second
    # update's loss is NaN; a save is due after it, and is refused (the losses are checked
    # before every save)
    argv = [*SMALL, "--dataset", "digits", "--lr", "1e30", "--warmup-fraction", "0",
            "--save-every-steps", "2"]
    status, out, err = run([*argv, "--checkpoint", str(tmp_path / "run")], capsys)
    assert status == 1 and err.count("\n") == 1
    assert err.startswith("error: the training loss became nan at update 2 (epoch 1); training "
                          "stopped")
    assert read_checkpoint_info(tmp_path / "run")["step"] == 1
    assert [p.name for p in (tmp_path / "run").iterdir() if p.name.isdigit()] == ["1"]


RUN_FOLDER = [".annotated_ssm.lock", "history.csv", "history.json"]  # and orbax's versions


def run_files(folder):
    """The names in a run folder but orbax's numbered versions (at least one)."""
    assert any(p.name.isdigit() for p in folder.iterdir())
    return sorted(p.name for p in folder.iterdir() if not p.name.isdigit())


def files_of(folder):
    """Each file under ``folder``: its path and modification time (a rewrite changes it)."""
    return {p.relative_to(folder): p.stat().st_mtime_ns for p in folder.rglob("*") if p.is_file()}


def test_a_run_saves_a_checkpoint_that_loads_and_is_replaced_only_when_asked(tmp_path, capsys,
                                                                            tiny_digits):
    path = tmp_path / "runs" / "s4d"
    argv = [*SMALL, "--dataset", "digits", "--max-steps", "3", "--batch-size", "20", "--checkpoint", str(path)]
    status, out, err = run([*argv, "--json"], capsys)
    assert status == 0, err
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["steps"] == 3 and summary["stopped"] == "step budget" and 0 <= summary["test_accuracy"] <= 1
    assert summary["checkpoint"] == str(path) and summary["best_epoch"] == 1
    model = load_model(path)
    assert model.architecture["d_model"] == 8 and model.architecture["n_classes"] == 10
    saved = files_of(path)
    # a finished run is not replaced without --overwrite: one line, status 2, nothing touched
    status, out, err = run([*argv, "--seed", "1"], capsys)
    assert status == 2 and out == "" and err.count("\n") == 1
    assert err.startswith(f"error: {str(path)!r} holds a finished run (3 updates), and nothing a "
                          "run saved is replaced without asking: continue it (--resume DIR")
    assert files_of(path) == saved
    status, out, err = run([*argv, "--seed", "1", "--overwrite"], capsys)
    assert status == 0, err
    assert sorted(p.name for p in path.parent.iterdir()) == ["s4d"]
    assert run_files(path) == RUN_FOLDER
    assert read_checkpoint_info(path)["train_config"]["seed"] == 1
    # --overwrite never removes what the run did not create: such a folder is refused
    (path / "notes.txt").write_text("mine")
    status, _, err = run([*argv, "--overwrite"], capsys)
    assert status == 2 and "holds files that are not a run folder's (['notes.txt'])" in err
    assert run_files(path) == sorted([*RUN_FOLDER, "notes.txt"])


def test_resume_takes_the_stored_options_extends_and_knows_a_finished_run(tmp_path, capsys,
                                                                          tiny_digits):
    path = tmp_path / "run"
    argv = [*SMALL, "--dataset", "digits", "--epochs", "2", "--batch-size", "20", "--lr", "0.01"]
    status, out, err = run([*argv, "--checkpoint", str(path)], capsys)
    assert status == 0, err
    assert out.splitlines()[-3].startswith("finished: s4d on digits, 2 epochs, 18 updates (")
    assert out.splitlines()[-2].startswith("best epoch ")
    assert out.splitlines()[-1] == (f"saved in {str(path)!r}: the best epoch and the last "
                                    "training state, history.json, history.csv")
    # finished, no more epochs: said, status 0, nothing loaded, built, trained or rewritten
    saved = files_of(path)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(cli, "load_dataset", None)  # calling either fails the test
        patch.setattr(train, "build_model", None)
        status, out, err = run(["--resume", str(path)], capsys)
    assert status == 0, err
    assert out.splitlines()[-1] == (f"the run in {str(path)!r} is finished (18 updates, 2 epochs); "
                                    "nothing to train. Give --epochs larger than 2 to extend it.")
    assert files_of(path) == saved
    # an option that differs is refused; more epochs extend the run with its stored options
    status, _, err = run(["--resume", str(path), "--lr", "0.1"], capsys)
    assert status == 2 and "lr: stored 0.01, given 0.1" in err and err.count("\n") == 1
    status, _, err = run(["--resume", str(path), "--epochs", "1"], capsys)
    assert status == 2 and "epochs: stored 2, given 1" in err and "epochs may grow" in err
    status, _, err = run(["--resume", str(path), "--checkpoint", str(tmp_path / "other")], capsys)
    assert status == 2 and "leave out --checkpoint" in err
    status, out, err = run(["--resume", str(path), "--epochs", "3", "--no-progress", "--json"], capsys)
    assert status == 0, err
    lines = out.splitlines()
    assert lines[2:4] == ["extending the run from 2 to 3 epochs: the learning-rate schedule is "
                          "recomputed for 27 updates.", "resuming from update 18 (epoch 3 of 3)"]
    summary = json.loads(lines[-1])
    assert summary["epochs"] == 3 and summary["steps"] == 27 and len(summary["val_accuracy"]) == 3
    # the history files: one row per epoch, the JSON with the test result
    rows = list(csv.DictReader((path / "history.csv").open()))
    assert [int(r["epoch"]) for r in rows] == [1, 2, 3] and [int(r["steps"]) for r in rows] == [9, 18, 27]
    assert [round(float(r["val_accuracy"]), 4) for r in rows] == summary["val_accuracy"]
    history = json.loads((path / "history.json").read_text())
    assert round(history["test_loss"], 4) == summary["test_loss"] and history["epoch"] == [1, 2, 3]
    assert not list(path.glob("*.tmp"))


def test_an_epoch_line_stays_and_the_bar_starts_after_compilation(tmp_path, capsys, tiny_digits,
                                                                   monkeypatch):
    bars = []

    class Bar:  # tqdm, recording how each epoch's bar starts
        write = staticmethod(print)

        def __init__(self, **kwargs):
            bars.append(kwargs)

        def update(self, n=1):
            pass

        def close(self):
            pass

    monkeypatch.setattr(train, "tqdm", Bar)
    argv = [*SMALL[:-1], "--dataset", "digits", "--epochs", "2", "--batch-size", "20"]
    status, out, err = run(argv, capsys)
    assert status == 0, err
    epoch_lines = [line for line in out.splitlines() if line.startswith("epoch ")]
    assert [line[:16] for line in epoch_lines] == ["epoch 1/2: loss ", "epoch 2/2: loss "]
    assert ", validation loss " in epoch_lines[0] and ", accuracy " in epoch_lines[0]
    assert epoch_lines[0].endswith(" s) best") or epoch_lines[0].endswith(" s)")
    # epoch 1's bar starts after its first update (the compiled one), epoch 2's at its first
    assert [(b["initial"], b["total"], b["desc"]) for b in bars] == [(1, 9, "s4d epoch 1/2"),
                                                                    (1, 9, "s4d epoch 2/2")]


def test_the_core_install_answers_a_book_data_set_with_one_line(tmp_path):
    # without the book's extra (its modules blocked as if not installed) scikit-learn's digits
    # cannot be made: one line that names the extra, status 2, before anything is loaded (the
    # default data set, MNIST-1D, is the core's: tests/test_package_layout.py trains on it)
    blocked = (*BOOK_LIBRARIES, *sorted(set(DATASET_NEEDS.values())), "mnist1d")
    code = (BLOCK_IMPORTS.format(blocked=blocked) + "from annotated_ssm.cli import main\n"
            "sys.exit(main(['--dataset', 'digits', '--epochs', '1']))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path, env=dict(os.environ, JAX_PLATFORMS="cpu"))
    assert done.returncode == 2 and done.stdout == "" and done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith("error: data set 'digits' needs 'sklearn', which is part of the "
                                  "book's extra: pip install \"annotated-ssm[book]\"")
    assert list(tmp_path.iterdir()) == []


def test_a_value_the_layer_refuses_is_a_one_line_error_with_status_2(capsys, tiny_digits):
    # the config checks the option's name against the layer's signature; its value is the
    # layer's to check, when the model is built (after the data set is loaded)
    status, out, err = run([*SMALL, "--dataset", "digits", "--layer-option", "init=nope"], capsys)
    assert status == 2 and err.count("\n") == 1
    assert err.startswith("error: layer 's4d' refuses its options: ") and "'nope'" in err


def test_the_selective_layer_trains_through_the_command_and_loads(tmp_path, capsys, tiny_digits):
    # A fifth layer needs nothing in config, model, training or checkpoints: s6 runs as is,
    # and the restored model reproduces the test accuracy the run reported.
    path = tmp_path / "s6"
    argv = ["--layer", "s6", "--d-model", "8", "--n-layers", "1", "--state-size", "4", "--no-progress",
            "--dataset", "digits", "--max-steps", "3", "--batch-size", "20", "--checkpoint", str(path),
            "--json"]
    status, out, err = run(argv, capsys)
    assert status == 0, err
    summary = json.loads(out.strip().splitlines()[-1])
    model = load_model(path)
    assert model.architecture["layer"] == "s6"
    accuracy = evaluate(model, tiny_digits.x_test, tiny_digits.y_test)["accuracy"]
    assert round(accuracy, 4) == summary["test_accuracy"]


def test_fit_replaces_a_run_only_with_overwrite_and_the_cli_resumes_only_its_data_sets(
        tmp_path, capsys):
    import numpy as np
    from annotated_ssm.train import build_model, fit

    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 16, 1)).astype(np.float32)
    y = (x[:, :8, 0].sum(axis=1) > 0).astype(np.int32)
    data = Dataset("sign", x[:48], y[:48], x[48:], y[48:], "classification", 2)
    config = TrainConfig(epochs=1, batch_size=8, progress=False)

    def model(seed):
        return build_model("s4d", data, d_model=8, n_layers=1, state_size=4, seed=seed)

    folder = tmp_path / "run"
    fit(model(0), data, config, checkpoint=folder)
    saved = files_of(folder)
    with pytest.raises(ValueError, match=r"holds a finished run \(5 updates\), and nothing a run "
                                         r"saved is replaced without asking"):
        fit(model(1), data, config, checkpoint=folder)
    assert files_of(folder) == saved
    fit(model(1), data, config, checkpoint=folder, overwrite=True)
    assert run_files(folder) == RUN_FOLDER
    assert files_of(folder) != saved
    status, _, err = run(["--resume", str(folder)], capsys)
    assert status == 2 and err == (f"error: the run in {str(folder)!r} was trained on the data set "
                                   "'sign', which the command line cannot load; resume it from "
                                   "Python with fit(..., resume_from=DIR).\n")
