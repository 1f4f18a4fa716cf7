"""The key bar: Textual's Footer, less a leak of every key it ever showed.

The Footer is composed again whenever the bindings are refreshed, and each key it makes binds itself to the
footer's `compact` (`data_bind`): a watcher kept on the footer, which Textual drops for a removed key only when
`compact` next changes. In this app it never does, so each refresh kept the keys it replaced for good, with
their styles and render caches (about 4 keys a run, ~0.5 MB a save in the live loop:
tests/test_tui_soak.py). Once the keys are composed again, the watchers of removed ones go.
"""

from __future__ import annotations

from textual.widgets import Footer


class KeyBar(Footer):
    async def recompose(self) -> None:
        await super().recompose()
        self.drop_removed_watchers()

    def drop_removed_watchers(self) -> None:
        """Forget the watchers of nodes that are closed (removed): Textual's own test, made at once."""
        watchers = getattr(self, "__watchers", None)  # reactive._watch's store: attribute -> [(node, callback)]
        if not isinstance(watchers, dict):
            return
        for entries in watchers.values():
            entries[:] = [(node, callback) for node, callback in entries
                          if not (getattr(node, "_closing", False) or getattr(node, "_closed", False))]
