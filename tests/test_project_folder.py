"""A project's own state on disk (core/project/folder.py)."""

import time as clock

from workbench.core.project.folder import Project


def test_clearing_the_triton_cache_renames_it_away_and_a_late_writer_cannot_reach_the_new_one(tmp_path):
    (tmp_path / "kernel.py").write_text("")
    project = Project.open(tmp_path)
    cache = project.triton_cache_dir
    (cache / "abc").mkdir(parents=True)
    (cache / "abc" / "k.cubin").write_bytes(b"x" * 100)
    late_writer = open(cache / "abc" / "late.ptx", "w")  # a cancelled worker, still compiling
    stale = cache.with_name(cache.name + ".old-1-0")  # an earlier session's, left mid-delete
    stale.mkdir()
    project.clear_triton_cache()
    late_writer.write("written after the clear")
    late_writer.close()
    assert cache.is_dir() and list(cache.iterdir()) == []
    assert not stale.exists()
    deadline = clock.monotonic() + 10
    while list(cache.parent.glob(cache.name + ".old-*")):  # deleted in the background
        assert clock.monotonic() < deadline
        clock.sleep(0.02)
    assert list(cache.iterdir()) == []
