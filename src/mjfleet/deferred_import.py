"""Modules that the libraries under a training process import at start-up, loaded at their first use instead.

rsl-rl-lib imports wandb with its log writers, a few tenths of a second of every worker's start-up that a run logging
to TensorBoard never uses.
"""

import importlib.machinery
import importlib.util
import sys
import types
from typing import Any


class DeferredModule(types.ModuleType):
    """Stands in ``sys.modules`` for a module until one of its attributes is used, then hands every use on to it.

    ``importlib.util.LazyLoader`` is not enough: ``inspect.getmodule`` (torch calls it while importing) asks every
    module in ``sys.modules`` for ``__file__``, which loads a lazily loaded one. This answers that from the module's
    spec and loads on anything else, ``__path__`` included, so that importing a submodule loads the package first."""

    def __init__(self, spec: importlib.machinery.ModuleSpec) -> None:
        super().__init__(spec.name)
        object.__setattr__(self, "__spec__", spec)
        object.__setattr__(self, "__file__", spec.origin)
        object.__setattr__(self, "__loader__", spec.loader)

    def _load(self) -> types.ModuleType:
        name = self.__name__
        if sys.modules.get(name) is self:
            del sys.modules[name]
        return importlib.import_module(name)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._load(), name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._load(), name, value)

    def __delattr__(self, name: str) -> None:
        delattr(self._load(), name)

    def __dir__(self) -> list[str]:
        return dir(self._load())


def defer(name: str) -> None:
    """Put a ``DeferredModule`` for the top-level module ``name`` into ``sys.modules``, unless it is imported already
    or not installed."""
    if name in sys.modules:
        return
    spec = importlib.util.find_spec(name)
    if spec is not None:
        sys.modules[name] = DeferredModule(spec)
