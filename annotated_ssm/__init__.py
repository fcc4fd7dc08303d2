"""annotated_ssm: deep state space models (S4, DSS, S4D, S5) in JAX and Flax NNX.

Modules, in the order the book introduces them:
    ssm          continuous-time SSMs: impulse response, basis, simulation, transfer function
    hippo        HiPPO matrices and their normal / DPLR forms
    discretize   Euler, bilinear and ZOH discretisation
    kernels      SSM convolution kernels (naive, S4 Cauchy, S4D Vandermonde, DSS) and FFT convolution
    scan         sequential and parallel scans of linear recurrences
    init         initialisations (log Δ, S4D/DSS eigenvalues, S5 blocks)
    layers       the S4, DSS, S4D and S5 layers (``get_layer(name)``)
    model        residual blocks and stacked models (classification, sequence-to-sequence)
    config       ModelConfig (the one architecture schema: models and checkpoints) and
                 TrainConfig: every default of a run, validated; the CLI's options
    train        the optax training loop (validation split, step budget, seeds), data parallelism
    cli          the command line (``python -m annotated_ssm.cli``, ``annotated-ssm-train``)
    checkpoint   checkpoints that record the architecture (load_model) and never delete a user's files
    data         offline datasets (MNIST-1D, digits, a long-range task) and downloaders (pooch)
    plotting     the chapters' figures
    widgets      the interactive explorers (explorer_numerics computes their numbers and
                 Figure 3's, explorer_figures draws them, static_explorer writes their
                 frames for the website)

The core install (``pip install annotated-ssm``) imports none of matplotlib, ipywidgets,
scikit-learn or mnist1d; ``plotting``, ``explorer_figures``, ``widgets`` and the book's data sets need the extra:
``pip install "annotated-ssm[book]"``.
"""

__version__ = "0.2.0"
