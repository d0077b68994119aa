"""Autofixes: the interface a rule's fix implements (:mod:`~auditor.fix.autofix`) and the
libcst codemod that threads the step through a call (:mod:`~auditor.fix.codemod`)."""
