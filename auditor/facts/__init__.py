"""Per-file facts: the records extracted from one parsed module
(:mod:`~auditor.facts.extract`) and their on-disk cache keyed by content
(:mod:`~auditor.facts.cache`)."""
