"""A stub `cpu` backend for Triton (see README.md): registered, never active, compiles nothing."""
