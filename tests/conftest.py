import gc
import pathlib
import sys

import jax
import pytest

# Make `from reference import ...` work from every test module.
sys.path.insert(0, str(pathlib.Path(__file__).parent))

# The package tests compile hundreds of small programs and run each once or twice: most of
# their time is XLA optimising machine code. Compile with little optimisation (the same
# program, with less optimised machine code), about a fifth less time for
# tests/test_layer_contract.py and test_model.py.
# This process only: the chapters (nbval's kernels) and the benchmarks run fully optimised.
jax.config.update("jax_disable_most_optimizations", True)


@pytest.fixture
def frozen_heap():
    """Leave the objects alive before the test out of the garbage collector (``gc.freeze``).

    A failed save or read ends in ``gc.collect()`` (``checkpoint.quiet_orbax``: what orbax
    reports of a failure comes when its futures are collected), and a full collection walks
    every object: 0.5-0.8 s in a test process that holds jax's caches of a whole module's
    models. What the test itself makes is collected as before, so orbax's failed futures
    still are; the frozen objects are those of earlier tests, which the test does not look
    at. At its end, the test's garbage is collected quietly (orbax's failed futures of a save
    the test made fail report when collected), not frozen by the next."""
    gc.freeze()
    yield
    from annotated_ssm.checkpoint import quiet_orbax

    with quiet_orbax(collect=True):
        pass
