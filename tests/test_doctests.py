"""The examples in the public API's docstrings run, and print what they say (doctest).

Every layer of ``LAYERS``, :func:`~annotated_ssm.train.fit`,
:func:`~annotated_ssm.data.load_dataset`, :func:`~annotated_ssm.checkpoint.save_checkpoint`
and :func:`~annotated_ssm.checkpoint.load_model` carry a short runnable example (``>>>``)
in their docstrings, which the API reference shows. Each is run here by the standard
:mod:`doctest` module, in the namespace of the object's module, from a temporary working
directory (an example may write a checkpoint); a docstring without an example fails, so a new
layer cannot come without one. The examples may use ``...`` for output that varies
(ELLIPSIS) and lay out their output freely (NORMALIZE_WHITESPACE).
"""

from __future__ import annotations

import doctest
import inspect

import pytest

from annotated_ssm import checkpoint, data, train
from annotated_ssm.layers import LAYERS

OBJECTS = {
    **{f"annotated_ssm.layers.{cls.__name__}": cls for cls in LAYERS.values()},
    "annotated_ssm.train.fit": train.fit,
    "annotated_ssm.data.load_dataset": data.load_dataset,
    "annotated_ssm.checkpoint.save_checkpoint": checkpoint.save_checkpoint,
    "annotated_ssm.checkpoint.load_model": checkpoint.load_model,
}
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def examples(name: str, obj) -> list[doctest.DocTest]:
    """The doctests in ``obj``'s own docstring (not its methods'), in its module's namespace."""
    module = inspect.getmodule(obj)
    finder = doctest.DocTestFinder(recurse=False)
    return [test for test in finder.find(obj, name, module=module, globs=vars(module).copy())
            if test.examples]


@pytest.mark.parametrize("name", OBJECTS)
def test_the_docstring_has_an_example_that_runs(name, tmp_path, monkeypatch):
    tests = examples(name, OBJECTS[name])
    assert tests, (f"{name}'s docstring has no example: add a short runnable one (>>> lines "
                   "and their output) under an 'Example:' heading")
    monkeypatch.chdir(tmp_path)
    runner = doctest.DocTestRunner(optionflags=FLAGS)
    for test in tests:
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} example lines of {name} failed"


def test_every_public_layer_is_checked():
    # A layer added to LAYERS is checked here without a change to this file.
    assert {f"annotated_ssm.layers.{cls.__name__}" for cls in LAYERS.values()} <= set(OBJECTS)
    assert len(LAYERS) >= 6


def _doubled(x):
    """Twice ``x``.

    Example:
        >>> _doubled(2)
        4
    """
    return 2 * x


def _wrong(x):
    """Claims too much.

    Example:
        >>> _wrong(2)
        5
    """
    return 2 * x


def test_the_runner_passes_a_right_example_and_fails_a_wrong_one():
    import sys

    results = {}
    for obj in (_doubled, _wrong):
        tests = examples(obj.__name__, obj)
        runner = doctest.DocTestRunner(optionflags=FLAGS)
        for test in tests:
            test.globs = vars(sys.modules[__name__]).copy()
            runner.run(test, out=lambda text: None)
        results[obj.__name__] = runner.summarize(verbose=False)
    assert results["_doubled"].attempted == 1 and results["_doubled"].failed == 0
    assert results["_wrong"].failed == 1
