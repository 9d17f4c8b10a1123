"""perfgate's command modules: each exposes ``register(subparsers)`` (see perfgate/__main__.py)."""
