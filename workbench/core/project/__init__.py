"""A kernel project: its folder and state (folder), workbench.toml (config), the kernel.py contract
and its cases (contract), the run history it keeps (history) and the scaffolds it is made from
(scaffold); the names plugins use are exported here. May import only the base layer (events, fsutil, stage); never torch at import time.
"""

from .config import ConfigError, ProjectConfig, load_config, seed_value
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
from .history import RunRecord, find_record, read_records, record_files, source_diff
from .scaffold import Catalog, Scaffold, ScaffoldError, builtin_scaffolds, create_project, validate_name

__all__ = ["Case", "Catalog", "ConfigError", "ContractError", "KernelModule", "Project", "ProjectConfig",
           "ProjectError", "RunRecord", "Scaffold", "ScaffoldError", "builtin_scaffolds", "create_project",
           "describe_config", "find_autotuners", "find_projects", "find_record", "first_line",
           "is_compilation_error", "load_config", "load_kernel", "problem_from_exception", "read_records",
           "record_files", "seed_value", "select_cases", "source_diff", "source_hash", "validate_name"]
