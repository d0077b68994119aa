"""The draft model config's attributes vLLM's model registry reads off the draft model class
(``draft-class-attrs``: ``speculator_config_class``, the speculator config a draft model class
declares), as the partial evaluator's configuration holds them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...index.index import ClassKey, module_name
from ..partial_eval import ABSENT, ClassRef, Obj, Unknown, Value, sub_config
from ..partial_eval.values import _Absent

if TYPE_CHECKING:
    from .part import DispatchPart


def draft_model_config(part: DispatchPart, hf: Obj, platform: str | None, fields: dict[str, Value] | None = None) -> Obj:
    """The draft's model config holding the draft hf config ``hf`` (and ``fields``): where ``hf``
    names its architectures, those and the draft class's declared attributes
    (:func:`draft_class_fields`, on ``platform``; None: every platform alike)."""
    r = part.roles
    draft = Obj(r["draft"], {r["hf"]: hf, **(fields or {})})
    with_text_config(part, draft, hf)
    field_name = part.config.override_field[0]
    if field_name in hf.fields:
        draft.fields[field_name] = hf.fields[field_name]
        draft.fields.update(draft_class_fields(part, hf.fields[field_name], platform))
    return draft


def with_text_config(part: DispatchPart, model_config: Obj, hf: Obj) -> None:
    """Set the model config's text config (role ``hf_text``) to what ``hf``'s text-config getter
    returns (``sub-config-getters``: the one sub-config present, else ``hf`` itself), when that
    is known; the model config is left without it otherwise (unknown)."""
    name = part.roles.get("hf_text")
    getter = part.config.sub_config_getters.get("get_text_config")
    if not name or getter is None:
        return
    text = sub_config(hf, tuple(getter))
    if text is not None:
        model_config.fields.setdefault(name, text)


def draft_class_fields(part: DispatchPart, architectures: Value, platform: str | None) -> dict[str, Value]:
    """The draft model config's ``draft-class-attrs``, as vLLM's model registry reads them off
    the draft model class the architecture names (on ``platform``): a class the model class
    holds there is its qualified name (``module.Class``), none held is None; unknown when
    the architecture, the class or what it holds is not known."""
    attrs = part.config.draft_class_attrs
    if not attrs:
        return {}
    arch = architectures[0] if isinstance(architectures, list) and len(architectures) == 1 else None
    lookup = part.provider.registry_lookup
    if not isinstance(arch, str):
        classes: list[ClassKey] = []
    elif platform is not None:
        one = lookup.model_class_for(arch, platform)
        classes = [one] if one is not None else []
    else:  # any platform: what every registered copy declares alike
        classes = sorted(lookup.classes_for(arch))
    world = part.evaluator().world
    out: dict[str, Value] = {}
    for attr in attrs:
        held = {_declared(world.class_attr(c, attr)) for c in classes}
        value = held.pop() if len(held) == 1 else None
        out[attr] = value if value is not None else Unknown(f"{part.roles['draft']}.{attr} (what the draft model "
                                                            "class declares)")
        if value == "":
            out[attr] = None
    return out


def _declared(held: Value | _Absent | None) -> str | None:
    """A class attribute as the registry records it: a class's qualified name, "" for none
    held (None in vLLM's record), None when not known."""
    if isinstance(held, ClassRef):
        return f"{module_name(held.cls[0])[0]}.{held.cls[1]}"
    return "" if held is ABSENT else None
