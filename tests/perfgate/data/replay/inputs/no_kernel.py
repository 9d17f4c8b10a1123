"""A submission without custom_kernel."""

X = 1
