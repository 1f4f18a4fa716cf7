"""The server's runs: one `workbench.core.run.Session` for the server's life, warm workers kept between tool calls.

A runner per mode (the GPU, or the Triton interpreter with `interpret`) is made on first use with
`keep_warm`: like the live loop's, it keeps spare workers started (torch and triton imported, the CUDA
context up) for the next run, so a second verify pays what a save pays in the live loop, not a cold start.
Runs are blocking (the runner relays a worker's events to `on_event` as they come) and one at a time: the
server calls `Session.run` from a worker thread and `Session.cancel` from the event loop when the client
cancels the call. The session fires the plugins' notification hooks for every run.
"""

from __future__ import annotations

from typing import Any, Callable

from workbench.core.run import PluginHooks, Session

# A client ends the server by closing its stdin and sends SIGTERM two seconds later; a spare still importing torch
# takes longer than that to notice a closed pipe, so the closing is waited for at most this long: whatever is left
# dies with this process (every worker holds a pipe only this process keeps open, and ends when it closes).
CLOSE_WAIT_S = 0.5


def open_session(hooks: PluginHooks | None = None, make_runner: Callable[[bool], Any] | None = None) -> Session:
    """The server's session: one lane over this machine's GPUs (none under the interpreter) per mode, spares kept
    warm; `make_runner(interpret)` stands in for that runner (tests)."""
    return Session(hooks, keep_warm=True, gpus="all", make=make_runner)

