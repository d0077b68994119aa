"""The engine: one scan's phases (:mod:`~auditor.engine.scan`), the whole-result cache
(:mod:`~auditor.engine.result_cache`) and inline suppressions applied to the findings
(:mod:`~auditor.engine.suppress`)."""
