"""perfgate's command modules: each exposes ``register(subparsers)`` (perfgate/__main__.py
registers them), parses its command line and calls the library; none imports another."""
