"""The SSM layers, by name: ``get_layer("s4d")`` returns the class ``S4DLayer``."""

from __future__ import annotations

from .._validation import check_choice
from .base import ConvolutionalSSMLayer, SSMLayer, SSMParam
from .dss import DSSLayer
from .s4 import S4Layer
from .s4d import S4DLayer
from .s5 import S5Layer
from .s6 import S6Layer
from .ssd import SSDLayer

#: name -> layer class: model, config, training and checkpoints know the layers by these names.
LAYERS: dict[str, type[SSMLayer]] = {
    "s4": S4Layer,
    "dss": DSSLayer,
    "s4d": S4DLayer,
    "s5": S5Layer,
    "s6": S6Layer,
    "ssd": SSDLayer,
}


def get_layer(name: str) -> type[SSMLayer]:
    """The layer class registered under ``name`` (one of ``LAYERS``)."""
    return LAYERS[check_choice("layer", name, LAYERS)]


__all__ = ["LAYERS", "get_layer", "SSMLayer", "SSMParam", "ConvolutionalSSMLayer",
           "S4Layer", "DSSLayer", "S4DLayer", "S5Layer", "S6Layer", "SSDLayer"]
