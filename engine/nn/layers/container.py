"""Containers: Sequential (indexable, sliceable, appendable) and ModuleList."""
from __future__ import annotations

from collections import OrderedDict
from typing import Any, Iterable, Iterator

from engine.nn.module import Module


class _Indexed(Module):
    """Children named "0", "1", ... (or given names), addressable by position."""

    def _index(self, idx: int) -> str:
        keys = list(self._modules)
        if not -len(keys) <= idx < len(keys):
            raise IndexError(f"index {idx} is out of range for {type(self).__name__} of length {len(keys)}")
        return keys[idx]

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())

    def __getitem__(self, idx: int | slice) -> Any:
        if isinstance(idx, slice):
            return type(self)(OrderedDict(list(self._modules.items())[idx]))
        return self._modules[self._index(int(idx))]

    def __setitem__(self, idx: int, module: Module) -> None:
        self.add_module(self._index(int(idx)), module)

    def __delitem__(self, idx: int | slice) -> None:
        keys = list(self._modules)[idx] if isinstance(idx, slice) else [self._index(int(idx))]
        for key in keys:
            delattr(self, key)

    def append(self, module: Module) -> Any:
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules: Iterable[Module]) -> Any:
        for module in modules:
            self.append(module)
        return self

    def _add_all(self, modules: tuple[Any, ...]) -> None:
        if len(modules) == 1 and isinstance(modules[0], dict):
            for name, module in modules[0].items():
                self.add_module(name, module)
        else:
            for i, module in enumerate(modules):
                self.add_module(str(i), module)


class Sequential(_Indexed):
    """Calls its children in order: ``Sequential(a, b, c)(x) == c(b(a(x)))``; also takes an OrderedDict."""

    def __init__(self, *modules: Any) -> None:
        super().__init__()
        self._add_all(modules)

    def forward(self, input: Any) -> Any:
        for module in self._modules.values():
            input = module(input)
        return input


class ModuleList(_Indexed):
    """A list of submodules that registers them (no forward of its own)."""

    def __init__(self, modules: Iterable[Module] | None = None) -> None:
        super().__init__()
        if isinstance(modules, dict):
            self._add_all((modules,))
        elif modules is not None:
            self.extend(modules)
