"""Opening a file at a line in the user's $EDITOR (VISUAL first, as git does)."""

from __future__ import annotations

import os
import shlex

# Editors that take `-g file:line` (VS Code and its kin) or `file:line` (Sublime) instead of `+line file`.
GOTO_FLAG = {"code", "code-insiders", "codium", "cursor", "windsurf"}
COLON_SUFFIX = {"subl", "sublime_text", "zed"}


def editor_command(path: str, line: int | None, environ: dict[str, str] | None = None) -> list[str] | None:
    """The command that opens `path` at `line`, or None when no editor is configured."""
    environ = os.environ if environ is None else environ
    editor = environ.get("VISUAL") or environ.get("EDITOR")
    if not editor:
        return None
    argv = shlex.split(editor)
    name = os.path.basename(argv[0])
    if not line:
        return [*argv, path]
    if name in GOTO_FLAG:
        return [*argv, "-g", f"{path}:{line}"]
    if name in COLON_SUFFIX:
        return [*argv, f"{path}:{line}"]
    return [*argv, f"+{line}", path]


def is_terminal_editor(argv: list[str]) -> bool:
    """GUI editors return at once and need no terminal; terminal ones need the app suspended."""
    return os.path.basename(argv[0]) not in GOTO_FLAG | COLON_SUFFIX
