"""The folder also holds torch.py, numpy.py and json.py; the real modules must be the ones used."""

import json

import numpy
import torch


def which():
    return torch.tensor([hasattr(torch, "softmax"), hasattr(numpy, "ndarray"), hasattr(json, "dumps")])
