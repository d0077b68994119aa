"""Source trees: a directory, a git tree, vLLM and its plugins combined into one
namespace (:mod:`~auditor.source.trees`, :mod:`~auditor.source.gittree`); release sdists
fetched from a package index (:mod:`~auditor.source.fetch`) and imported into a git
repository of releases (:mod:`~auditor.source.releases`)."""
