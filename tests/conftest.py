import pathlib
import sys

import jax

# Make `from reference import ...` work from every test module.
sys.path.insert(0, str(pathlib.Path(__file__).parent))

# The package tests compile hundreds of small programs and run each once or twice: most of
# their time is XLA optimising machine code. Compile with little optimisation (the same
# program, with less optimised machine code), about a fifth less time for
# tests/test_layer_contract.py and test_model.py.
# This process only: the chapters (nbval's kernels) and the benchmarks run fully optimised.
jax.config.update("jax_disable_most_optimizations", True)
