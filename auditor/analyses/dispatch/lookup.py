"""Registry lookups: registered architectures, their MTP model classes, per-platform copies."""

from __future__ import annotations

from ...index.index import ClassKey
from .constructors import fixed_layer_count
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
        """The field sizing the architecture's MTP layers, dotted under the nested config the
        model reads it from (``text_config.num_nextn_predict_layers``; :mod:`.count_holder`)."""
        model = self.model_class_for(arch, platform)
        if model is None:
            return None
        if fixed_layer_count(self, model) is not None:
            # The model builds its layers whatever the config says: the fields its container
            # reads only place them (an index offset). A checkpoint still states its MTP layer
            # count where dispatch's count gates read it (a multi-module speculator is chosen
            # from it): that is the field this model is given.
            gated = sorted({g.field for g in self.provider.count_gates()})
            return gated[0] if gated else None
        return self.provider.count_holder.count_field(model, self.reach.layer_count_fields(model))

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
