"""Optimizers (SGD, Adam, AdamW) and learning-rate schedulers, with PyTorch's interface and update rules."""
from __future__ import annotations

from engine.optim import lr_scheduler
from engine.optim.adam import Adam, AdamW
from engine.optim.lr_scheduler import CosineAnnealingLR, LRScheduler, StepLR
from engine.optim.optimizer import Optimizer
from engine.optim.sgd import SGD

__all__ = ["SGD", "Adam", "AdamW", "CosineAnnealingLR", "LRScheduler", "Optimizer", "StepLR", "lr_scheduler"]
