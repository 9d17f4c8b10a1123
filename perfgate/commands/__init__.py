"""perfgate's command modules: each parses its command line and calls the library; none imports
another (perfgate/__main__.py registers them)."""
