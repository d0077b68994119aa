"""A small three-valued partial evaluator over the statement trees of the facts: the
value types (:mod:`.values`), the builtins it models (:mod:`.builtins`) and the
evaluator of statements and expressions (:mod:`.evaluator`)."""

from .constants import module_constant
from .evaluator import MAX_CALL_DEPTH, MAX_PATHS, Evaluator, World
from .expressions import sub_config
from .values import (
    ABSENT,
    ClassRef,
    Decision,
    EnumMember,
    FuncRef,
    Instance,
    ModuleRef,
    Obj,
    Path,
    Unknown,
    Value,
    describe,
    expr_text,
    truth,
)

__all__ = [
    "ABSENT", "ClassRef", "Decision", "EnumMember", "Evaluator", "FuncRef", "Instance", "MAX_CALL_DEPTH", "ModuleRef", "MAX_PATHS", "Obj",
    "Path", "Unknown", "Value", "World", "describe", "expr_text", "module_constant", "sub_config", "truth",
]
