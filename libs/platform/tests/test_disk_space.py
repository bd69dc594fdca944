"""The disk of a real folder, measured: full only below what is needed, named by its folder."""

from __future__ import annotations

from seedline_platform.disk_space import check, check_here, free_bytes, needed_bytes


def test_a_home_on_a_disk_short_of_what_is_needed_is_named_with_what_is_free(tmp_path):
    (tmp_path / "nats").mkdir()
    free = free_bytes(tmp_path)
    state = check(tmp_path, needed=free + 10**15)
    assert state is not None and state.folder == str(tmp_path.resolve())
    assert 0 <= state.free and state.needed == free + 10**15
    assert check(tmp_path, needed=0) is None


def test_a_home_that_is_not_here_is_nothing_to_look_at(tmp_path):
    assert check(tmp_path / "elsewhere", needed=10**18) is None


def test_what_is_needed_comes_from_the_environment_in_megabytes(tmp_path):
    assert needed_bytes({"SEEDLINE_MIN_FREE_MB": "16"}) == 16_000_000
    assert needed_bytes({}) == 100_000_000 == needed_bytes({"SEEDLINE_MIN_FREE_MB": "lots"})
    env = {"SEEDLINE_HOME": str(tmp_path), "SEEDLINE_MIN_FREE_MB": str(10**12)}
    assert check_here(env) is not None
