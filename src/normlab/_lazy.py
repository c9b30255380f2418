"""Lazy exports for the sub-packages: names are imported on first use, so that ``import
normlab.<sub-package>`` and the command line stay fast (no Numba, PyMC or openai at import)."""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys


def lazy_exports(package: str, exports: dict[str, str], submodules=()):
    """``(__getattr__, __dir__, __all__)`` for ``package``: ``exports`` maps a public name to the
    module (relative to ``package``) defining it; ``submodules`` are exposed as attributes."""
    submodules = set(submodules)
    names = sorted(exports) + sorted(submodules)

    def __getattr__(name: str):
        if name in submodules:
            return importlib.import_module(f"{package}.{name}")
        mod = exports.get(name)
        if mod is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{mod}"), name)
        importlib.import_module(package).__dict__[name] = value  # cache: next access is direct
        return value

    def __dir__():
        return sorted(set(importlib.import_module(package).__dict__) | set(names))

    return __getattr__, __dir__, names


# ----------------------------------------------------------------------------- moved modules
#: Old dotted path of a moved module -> its current path (filled by each package's ``_MOVED`` table).
_MOVED: dict[str, str] = {}


class _AliasSpec(importlib.machinery.ModuleSpec):
    """The spec of an old path: its parent package is the new path's, so that ``python -m OLD`` runs the
    new module's code with the relative imports of its new place (``from ..fit import ...``)."""

    @property
    def parent(self):
        return self.origin.rpartition(".")[0]


class _Moved(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Old paths of moved modules: importing one gives the very module of its new path (one class
    identity, so monkeypatching, pickles and saved-result tags keep working), and ``python -m OLD``
    runs ``NEW``. Consulted only after the ordinary finders fail: no cost on other imports."""

    _specs: dict = {}

    def find_spec(self, name, path=None, target=None):
        new = _MOVED.get(name)
        return None if new is None else _AliasSpec(name, self, origin=new)

    def create_module(self, spec):
        module = importlib.import_module(_MOVED[spec.name])
        self._specs[spec.name] = module.__spec__  # importlib sets the alias's spec on it: put the real one back
        return module

    def exec_module(self, module):
        module.__spec__ = self._specs.pop(module.__spec__.name, module.__spec__)

    def get_code(self, name):  # ``python -m OLD``
        new = _MOVED[name]
        return importlib.util.find_spec(new).loader.get_code(new)


def moved_modules(package: str, table: dict[str, str]) -> None:
    """Keep the old paths of ``package``'s moved modules importable: ``table`` maps an old
    module path to its new one, both relative to ``package``."""
    _MOVED.update({f"{package}.{old}": f"{package}.{new}" for old, new in table.items()})
    if not any(isinstance(f, _Moved) for f in sys.meta_path):
        sys.meta_path.append(_Moved())
