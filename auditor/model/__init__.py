"""Result models: what a scan found (:mod:`auditor.model.findings`) and what a history
of releases found (:mod:`auditor.model.history`). Renderers depend on these only."""
