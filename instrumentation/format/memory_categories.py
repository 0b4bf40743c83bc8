"""The engine's allocation categories as the logs carry them (`mem/<device>/<category>_bytes`, snapshot blocks,
leak evidence); engine.memory.CATEGORIES is their source and a test keeps the two equal."""
from __future__ import annotations

PARAMETER = "parameter"
GRADIENT = "gradient"
OPTIMIZER_STATE = "optimizer_state"
ACTIVATION = "activation"
TEMPORARY = "temporary"  # what backward keeps of the forward pass
INPUT = "input"  # data, constants, loaded tensors
CATEGORIES = (PARAMETER, GRADIENT, OPTIMIZER_STATE, ACTIVATION, TEMPORARY, INPUT)
