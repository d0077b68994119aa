"""Registry lookups: registered architectures, their MTP model classes, per-platform copies."""

from __future__ import annotations

from ...index.index import ClassKey
from .part import DispatchPart


class RegistryLookup(DispatchPart):
    def architectures(self) -> list[str]:
        return sorted({a for _, archs in self.registry.registry() for a in archs})

    def mtp_architectures(self) -> list[tuple[str, ClassKey]]:
        """Every registered architecture whose class takes part in step threading, with
        its class (one per architecture; platform copies share their architecture)."""
        mtp = set(self.registry.model_classes())
        out: dict[str, ClassKey] = {}
        for cls, archs in self.registry.registry():
            if cls in mtp:
                for a in archs:
                    out.setdefault(a, cls)
        return sorted(out.items())

    def layer_count_field(self, arch: str, platform: str) -> str | None:
        model = self.model_class_for(arch, platform)
        fields = self.reach.layer_count_fields(model) if model else []
        return fields[0] if fields else None

    def classes_for(self, arch: str) -> list[ClassKey]:
        return [c for c, archs in self.registry.registry() if arch in archs]

    def model_class_for(self, arch: str, platform: str) -> ClassKey | None:
        cands = sorted(self.classes_for(arch))
        if not cands:
            return None
        dirs = set(self.config.platform_dirs.values())
        want = self.config.platform_dirs.get(platform, platform)

        def segments(c: ClassKey) -> set[str]:
            return set(c[0].split("/")[:-1])

        exact = [c for c in cands if want in segments(c)]
        if exact:
            return exact[0]
        neutral = [c for c in cands if not (segments(c) & dirs)]
        return (neutral or cands)[0]
