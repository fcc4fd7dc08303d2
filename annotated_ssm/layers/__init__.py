"""The four SSM layers, by name: ``get_layer("s4d")`` returns the class ``S4DLayer``."""

from __future__ import annotations

import importlib

from .._validation import check_choice
from .base import ConvolutionalSSMLayer, DiagonalSystem, SSMLayer, SSMParam

# name -> (module, class). Imported lazily so a missing optional piece never breaks the rest.
LAYERS = {
    "s4": ("annotated_ssm.layers.s4", "S4Layer"),
    "dss": ("annotated_ssm.layers.dss", "DSSLayer"),
    "s4d": ("annotated_ssm.layers.s4d", "S4DLayer"),
    "s5": ("annotated_ssm.layers.s5", "S5Layer"),
}


def get_layer(name: str) -> type[SSMLayer]:
    """The layer class registered under ``name`` (one of ``LAYERS``)."""
    check_choice("layer", name, LAYERS)
    module, cls = LAYERS[name]
    return getattr(importlib.import_module(module), cls)


__all__ = ["LAYERS", "get_layer", "SSMLayer", "SSMParam", "ConvolutionalSSMLayer", "DiagonalSystem"]
