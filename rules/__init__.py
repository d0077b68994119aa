"""Rule registry: every module ``rules/mtpNNN_*.py`` defines one :class:`rules.base.Rule`."""

from __future__ import annotations

import importlib
import pkgutil

from rules.base import Rule


def all_rules() -> list[type[Rule]]:
    found: list[type[Rule]] = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if not info.name.startswith("mtp"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        for obj in vars(module).values():
            if isinstance(obj, type) and issubclass(obj, Rule) and obj is not Rule and obj.__module__ == module.__name__:
                found.append(obj)
    return sorted(found, key=lambda r: r.code)
