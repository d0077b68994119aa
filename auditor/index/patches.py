"""Issue 13: functions a platform plugin replaces at import (monkeypatches), recorded for
the index's lookups (:class:`~auditor.index.index.Index` is a :class:`PatchTable`)."""

from __future__ import annotations

from typing import Callable, Iterable

_ClassKey = tuple[str, str]  # (path, qualname), as auditor.index.index.ClassKey
_FuncKey = tuple[str, str]


class PatchTable:
    """Which functions plugins replaced, where, on which class; patches are resolved on
    demand, by the name of the class (or ``fn:<name>`` of the module function) they may
    change: resolving every patch target up front would read modules the analysis never needs."""

    def __init__(self) -> None:
        # Set by the plugins provider before anything resolves a method.
        self._replaced: dict[_FuncKey, _FuncKey] = {}
        self._replaced_methods: dict[_ClassKey, dict[str, _FuncKey]] = {}
        self._patched_owner: dict[_FuncKey, _ClassKey] = {}
        self._patch_site: dict[_FuncKey, str] = {}
        self._patched_name: dict[_FuncKey, str] = {}
        self._still_run: set[_FuncKey] = set()  # patched, but saved and possibly called by the wrapper
        # Patches are resolved on demand, by the name of the class (or ``fn:<name>`` of the
        # module function) they may change: resolving every patch target up front would
        # read modules the analysis never needs.
        self._pending_patches: dict[str, list[object]] = {}
        self._patch_resolver: Callable[[object], None] | None = None

    def replace_function(
        self, original: _FuncKey, replacement: _FuncKey, owner: _ClassKey | None, site: str, keeps_original: bool = False
    ) -> None:
        """A plugin assigns ``replacement`` to ``original`` (a method of ``owner``, or a
        module function when ``owner`` is None) at ``site`` (``path:line``): from now on
        lookups find the replacement. ``keeps_original``: the plugin saved the original
        first (a wrapper), so its code may still run."""
        self._replaced[original] = replacement
        if keeps_original:
            self._still_run.add(original)
        else:
            self._still_run.discard(original)
        name = original[1].rpartition(".")[2]
        self._patch_site.setdefault(replacement, site)
        self._patched_name.setdefault(replacement, name)
        if owner is not None:
            self._replaced_methods.setdefault(owner, {})[name] = replacement
            self._patched_owner.setdefault(replacement, owner)

    def defer_patches(self, by_name: dict[str, list[object]], resolver: Callable[[object], None]) -> None:
        """Patch candidates keyed by the class name (or ``fn:<function name>``) they may
        change; ``resolver`` resolves one and calls :meth:`replace_function`."""
        for name, cands in by_name.items():
            self._pending_patches.setdefault(name, []).extend(cands)
        self._patch_resolver = resolver

    def pending_patch_names(self) -> set[str]:
        return set(self._pending_patches)

    def settle_patches(self, names: Iterable[str] | None = None) -> None:
        """Resolve the pending patch candidates for ``names`` (all when None)."""
        for name in sorted(self._pending_patches) if names is None else names:
            self._settle(name)

    def _settle(self, name: str) -> None:
        cands = self._pending_patches.pop(name, None)
        if cands and self._patch_resolver is not None:
            for c in cands:
                self._patch_resolver(c)

    def _settle_key(self, key: _FuncKey) -> None:
        if self._pending_patches:
            owner, _, name = key[1].rpartition(".")
            self._settle(owner.rpartition(".")[2] if owner else "fn:" + name)

    def replacement(self, key: _FuncKey) -> _FuncKey:
        self._settle_key(key)
        return self._replaced.get(key, key)

    def replaced(self, key: _FuncKey) -> bool:
        """The function was patched away (its code no longer runs under the plugin)."""
        self._settle_key(key)
        return key in self._replaced and self._replaced[key] != key and key not in self._still_run

    def patched(self) -> dict[_FuncKey, _FuncKey]:
        """Every function a plugin patched so far (original -> replacement)."""
        return dict(self._replaced)

    def patch_site(self, key: _FuncKey) -> str | None:
        """Where a plugin patched this function in (``path:line``), for call chains."""
        return self._patch_site.get(key)

    def patched_name(self, key: _FuncKey) -> str | None:
        """The name a plugin's function was patched in under (the method callers call:
        ``forward`` for a ``patched_forward`` assigned to ``FooMTP.forward``)."""
        return self._patched_name.get(key)

    def patched_owner(self, key: _FuncKey) -> _ClassKey | None:
        """The class a plugin's function was patched onto (its ``self``)."""
        return self._patched_owner.get(key)
