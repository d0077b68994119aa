"""Field annotations as the facts keep them (``union_names``): a union of names, or a wrapper
that only annotates its type (typing's ``Annotated``, pydantic's ``SkipValidation``); any other
generic is no one type (a ``list[A]`` holds A's, it is none)."""

from __future__ import annotations

import ast

import pytest

from auditor.facts.statements import union_names


@pytest.mark.parametrize("text,names", [
    ("A", ("A",)),
    ("A | None", ("A", "None")),
    ("Optional[A]", ("A", "None")),
    ("SkipValidation[ModelConfig]", ("ModelConfig",)),
    ("Annotated[A | None, Field(gt=0)]", ("A", "None")),
    ("SkipValidation[Optional[A]]", ("A", "None")),
    ("list[A]", None),
    ("dict[str, A]", None),
    ("A.B", None),
])
def test_an_annotation_is_the_names_of_its_type(text, names):
    assert union_names(ast.parse(text, mode="eval").body) == names
