"""Element structures of the input pipeline: numpy array leaves inside tuples and dicts, flattened and packed."""
from __future__ import annotations

import operator
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

# An element is a numpy array, or a tuple / dict whose values are elements.
Element = Any


def as_array(value: Any) -> np.ndarray:
    """A numpy array from an array, a list, a number, or anything with ``.numpy()`` (an engine Tensor)."""
    to_numpy = getattr(value, "numpy", None)
    if callable(to_numpy):
        value = to_numpy()
    array = np.asarray(value)
    if array.dtype == object:
        raise ValueError(f"cannot make a numeric array of {type(value).__name__} {_preview(value)}: the items are "
                         "ragged or not numbers (a list of arrays is only a tuple of components when every item "
                         "is a numpy array or a Tensor)")
    return array


def _preview(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _is_array_object(value: Any) -> bool:
    return isinstance(value, np.ndarray) or callable(getattr(value, "numpy", None))


def to_structure(value: Any) -> Element:
    """Normalize user data to an element: dicts stay dicts, tuples stay tuples, leaves become numpy arrays.

    A list whose items are all array objects (numpy arrays or Tensors) is a tuple of components; any other
    list is one array (``[[1, 2], [3, 4]]`` is a 2x2 array).
    """
    if type(value) is np.ndarray and value.dtype != object:  # the common case, first
        return value
    if isinstance(value, dict):
        return {key: to_structure(item) for key, item in value.items()}
    if isinstance(value, tuple) or (isinstance(value, list) and value and all(map(_is_array_object, value))):
        return tuple(to_structure(item) for item in value)
    return as_array(value)


def flatten(element: Element) -> list[np.ndarray]:
    """The leaves of ``element`` in a fixed order (tuple order, dict insertion order)."""
    if isinstance(element, tuple):
        if all(type(item) is np.ndarray for item in element):
            return list(element)
        return [leaf for item in element for leaf in flatten(item)]
    if isinstance(element, dict):
        return [leaf for item in element.values() for leaf in flatten(item)]
    return [element]


def leaf_names(element: Element, prefix: str = "") -> list[str]:
    """Names of the leaves, in ``flatten`` order: ``[0]``, ``['image']``, ``[1]['mask']``; "" for a bare array."""
    if isinstance(element, tuple):
        return [name for i, item in enumerate(element) for name in leaf_names(item, f"{prefix}[{i}]")]
    if isinstance(element, dict):
        return [name for key, item in element.items() for name in leaf_names(item, f"{prefix}[{key!r}]")]
    return [prefix]


def pack(template: Element, leaves: Iterator[np.ndarray]) -> Element:
    """Rebuild ``template``'s structure, taking its leaves in order from ``leaves``."""
    if isinstance(template, tuple):
        return tuple(pack(item, leaves) for item in template)
    if isinstance(template, dict):
        return {key: pack(item, leaves) for key, item in template.items()}
    return next(leaves)


def packer(template: Element) -> Callable[[Sequence[np.ndarray]], Element]:
    """A fast function from a flat sequence of leaves to ``template``'s structure."""
    if not isinstance(template, (tuple, dict)):
        return operator.itemgetter(0)
    if isinstance(template, tuple) and not any(isinstance(item, (tuple, dict)) for item in template):
        return tuple
    return lambda leaves: pack(template, iter(leaves))


def stack(elements: list[Element], what: str) -> Element:
    """Stack equally structured elements leaf by leaf along a new first axis; ``what`` names the caller."""
    columns = [flatten(element) for element in elements]
    if any(len(column) != len(columns[0]) for column in columns):
        raise ValueError(f"{what}: elements have different structures, e.g. {_shape_of(elements[0])} "
                         f"and {next(_shape_of(e) for e, c in zip(elements, columns) if len(c) != len(columns[0]))}")
    stacked = []
    for name, leaves in zip(leaf_names(elements[0]), zip(*columns)):
        try:
            stacked.append(np.stack(leaves))
        except ValueError as error:
            shapes = sorted({np.shape(leaf) for leaf in leaves})
            raise ValueError(f"{what}: cannot stack component {name or '(the element)'} whose elements have "
                             f"different shapes {shapes}") from error
    return pack(elements[0], iter(stacked))


def _shape_of(element: Element) -> Any:
    if isinstance(element, tuple):
        return tuple(_shape_of(item) for item in element)
    if isinstance(element, dict):
        return {key: _shape_of(item) for key, item in element.items()}
    return np.shape(element)

