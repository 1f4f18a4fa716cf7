"""Kernel Workbench: write, verify and benchmark Triton kernels."""

from .commands import Command, Context, hookimpl

__all__ = ["Command", "Context", "hookimpl", "__version__"]
__version__ = "0.1.0"
