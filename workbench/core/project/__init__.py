"""A kernel project: its folder and state (folder), workbench.toml (config), the kernel.py contract
and its cases (contract), the run history it keeps (history) and the scaffolds it is made from
(scaffold). May import only the base layer (events, fsutil, stage); never torch at import time.
"""

from .config import ConfigError, ProjectConfig, load_config
from .contract import (
    Case,
    ContractError,
    KernelModule,
    describe_config,
    find_autotuners,
    first_line,
    is_compilation_error,
    load_kernel,
    problem_from_exception,
    select_cases,
)
from .folder import Project, ProjectError, find_projects, source_hash

__all__ = ["Case", "ConfigError", "ContractError", "KernelModule", "Project", "ProjectConfig", "ProjectError",
           "describe_config", "find_autotuners", "find_projects", "first_line", "is_compilation_error",
           "load_config", "load_kernel", "problem_from_exception", "select_cases", "source_hash"]
