"""Call resolution over every class a route can load (issue 18, MTP005).

:class:`CallProvider` fans ``self.model(...)`` out over the MTP model classes (those that
take part in step threading). A call that passes the step must also be bound against the
classes that cannot take it — a registered draft model with no step parameter, an EAGLE
head — so this provider resolves the same calls with the registry fan-out over every
class the registry tables name. Which of them a route really loads with the calling
drafter is the dispatch's answer (:mod:`auditor.analyses.dispatch.load_routes`).
"""

from __future__ import annotations

from typing import Iterable

from ..index.index import ClassKey
from .calls import CallProvider, Obj
from .types import REGISTRY


class LoadCallProvider(CallProvider):
    def expand(self, objs: Iterable[ClassKey], model_class: ClassKey | None) -> list[Obj]:
        out: list[Obj] = []
        for o in objs:
            if o == REGISTRY:
                if self._registry_pairs is None:
                    # No registry in the tree (a fixture): the model classes the registry provider infers.
                    loadable = [m for m, _ in self.registry.registry()] or self.registry.model_classes()
                    self._registry_pairs = [(m, m) for m in loadable]
                out.extend(self._registry_pairs)
            else:
                out.append((o, model_class))
        return out
