"""CUDA backend internals: the own kernels (``kernels``) and their sources; imported only for CuPy arrays."""
