"""The index: every module's facts, symbols and lookups of one source tree
(:mod:`auditor.index.index`)."""
