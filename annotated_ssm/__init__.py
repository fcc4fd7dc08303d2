"""annotated_ssm: deep state space models (S4, DSS, S4D, S5, S6) in JAX and Flax NNX.

The library, in the order the book introduces it:
    continuous      continuous-time SSMs: impulse response, basis, simulation, transfer function
    hippo           HiPPO matrices, their normal / DPLR forms, HiPPO-N's eigenvalues
    discretize      Euler, bilinear and ZOH discretisation
    kernels         SSM convolution kernels (naive, S4 Cauchy, S4D Vandermonde, DSS) and FFT
                    convolution
    scan            sequential and parallel scans of linear recurrences
    initialization  initialisations (log Δ, S4D/DSS eigenvalues, S5 blocks)
    layers          the S4, DSS, S4D, S5, S6 and SSD layers (``LAYERS``, ``get_layer(name)``)
    model           residual blocks and stacked models (classification, sequence-to-sequence)
    config          ModelConfig (the one architecture schema: models and checkpoints) and
                    TrainConfig: every default of a run, validated; the CLI's options
    train           the optax training loop (validation split, step budget, seeds), data
                    parallelism
    cli             the command line (``python -m annotated_ssm.cli``, ``annotated-ssm-train``)
    checkpoint      checkpoints that record the architecture (load_model) and never delete a
                    user's files
    data            offline datasets (MNIST-1D, digits, a long-range task), your own (.npz)
                    and downloaders (pooch)
    mnist1d         MNIST-1D's generator (Greydanus 2020), as its package draws it

The book wing, :mod:`annotated_ssm.book`, holds what only the chapters and the website need
(figures, explorers and their numbers, the static explorer frames, the chapters' display
helpers); it imports the library, never the reverse. The package is not on PyPI: install
it from a clone (``pip install -e .``) or from the repository's address (the README gives
the line). The core install imports none of matplotlib, ipywidgets or scikit-learn
(MNIST-1D's generator is carried in :mod:`annotated_ssm.mnist1d`); the book wing and the
digits data sets need the extra: ``pip install -e ".[book]"``.
"""

__version__ = "0.2.0"
