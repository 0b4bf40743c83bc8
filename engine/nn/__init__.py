"""Layers, losses and initialisers: ``engine.nn`` mirrors the core of ``torch.nn``."""
from __future__ import annotations

from engine.nn import functional, init
from engine.nn.layers.activation import GELU, LeakyReLU, LogSoftmax, ReLU, Sigmoid, Softmax, Tanh
from engine.nn.layers.container import ModuleList, Sequential
from engine.nn.layers.linear import Identity, Linear
from engine.nn.module import Module
from engine.nn.parameter import Parameter

__all__ = ["GELU", "Identity", "LeakyReLU", "Linear", "LogSoftmax", "Module", "ModuleList", "Parameter", "ReLU",
           "Sequential", "Sigmoid", "Softmax", "Tanh", "functional", "init"]
