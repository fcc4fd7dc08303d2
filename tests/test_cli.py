"""The command line ``python -m annotated_ssm.cli``: options generated from the config
dataclasses (help and default for each), every bad argument and checkpoint path rejected
with one line ``error: …`` and exit status 2 before any data is loaded, a diverged run
that never overwrites a good checkpoint, and a real run that saves a loadable checkpoint."""

import dataclasses
import json
import os
import subprocess
import sys

import pytest

from annotated_ssm import cli
from annotated_ssm.checkpoint import load_model, read_checkpoint_info
from annotated_ssm.config import ModelConfig, TrainConfig
from annotated_ssm.data import Dataset, load_dataset
from annotated_ssm.cli import main
from annotated_ssm.train import evaluate

SMALL = ["--layer", "s4d", "--d-model", "8", "--n-layers", "1", "--state-size", "4", "--step-max", "1",
         "--no-progress"]


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
            help_words = " ".join(field.metadata["help"].split())
            assert help_words in entry[0], (flag, help_words)
            if field.name != "layer_options":
                assert entry[1].startswith(f"{getattr(defaults, field.name)})"), (flag, entry[1][:20])
    assert "--dataset" in flat and "mnist1d" in flat and "--checkpoint" in flat
    assert "time-budget" not in flat and "S6" in flat and "SIGTERM" in flat


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
    assert read_checkpoint_info(tmp_path / "run" / "last")["step"] == 1
    assert sorted(p.name for p in (tmp_path / "run" / "last").iterdir()) == ["1"]


def test_a_run_saves_a_checkpoint_that_loads_and_can_be_replaced(tmp_path, capsys, tiny_digits):
    path = tmp_path / "runs" / "s4d"
    argv = [*SMALL, "--dataset", "digits", "--max-steps", "3", "--batch-size", "20", "--checkpoint", str(path)]
    status, out, err = run(argv, capsys)
    assert status == 0, err
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["steps"] == 3 and summary["stopped"] == "step budget" and 0 <= summary["test_accuracy"] <= 1
    assert summary["checkpoint"] == str(path / "last") and summary["best"] == str(path / "best")
    assert summary["best_epoch"] == 1
    model = load_model(path / "best")
    assert model.architecture["d_model"] == 8 and model.architecture["n_classes"] == 10
    assert load_model(path / "last").architecture == model.architecture
    status, out, err = run([*argv[:-2], "--seed", "1", "--checkpoint", str(path)], capsys)  # a finished run
    assert status == 0, err                                                                 # may be replaced
    assert sorted(p.name for p in path.parent.iterdir()) == ["s4d"]
    assert sorted(p.name for p in path.iterdir()) == ["best", "last"]


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
            "--dataset", "digits", "--max-steps", "3", "--batch-size", "20", "--checkpoint", str(path)]
    status, out, err = run(argv, capsys)
    assert status == 0, err
    summary = json.loads(out.strip().splitlines()[-1])
    model = load_model(path / "best")
    assert model.architecture["layer"] == "s6"
    accuracy = evaluate(model, tiny_digits.x_test, tiny_digits.y_test)["accuracy"]
    assert round(accuracy, 4) == summary["test_accuracy"]
