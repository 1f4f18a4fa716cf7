"""workbench-sanitizer: `workbench sanitize`, a project's cases under NVIDIA compute-sanitizer.

Registered through the entry point ``[project.entry-points.workbench] sanitizer = "workbench_sanitizer"``.
"""

from workbench import hookimpl

from . import events  # noqa: F401 - registers this plugin's event types with the parent's event reader
from .command import SANITIZE

__version__ = "0.1.0"


@hookimpl
def workbench_register_commands(register):
    register(SANITIZE)
