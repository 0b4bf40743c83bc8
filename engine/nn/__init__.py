"""Layers, losses and initialisers: ``engine.nn`` mirrors the core of ``torch.nn``."""
from __future__ import annotations

from engine.nn import functional, init
from engine.nn.layers.activation import GELU, LeakyReLU, LogSoftmax, ReLU, Sigmoid, Softmax, Tanh
from engine.nn.layers.container import ModuleList, Sequential
from engine.nn.layers.conv import Conv2d
from engine.nn.layers.dropout import Dropout
from engine.nn.layers.flatten import Flatten
from engine.nn.layers.linear import Identity, Linear
from engine.nn.layers.normalization import BatchNorm1d, BatchNorm2d
from engine.nn.layers.pooling import AvgPool2d, MaxPool2d
from engine.nn.models import DigitsCNN
from engine.nn.module import Module
from engine.nn.parameter import Parameter

__all__ = ["AvgPool2d", "BatchNorm1d", "BatchNorm2d", "Conv2d", "DigitsCNN", "Dropout", "Flatten", "GELU", "Identity",
           "LeakyReLU", "Linear", "LogSoftmax", "MaxPool2d", "Module", "ModuleList", "Parameter", "ReLU", "Sequential",
           "Sigmoid", "Softmax", "Tanh", "functional", "init"]
