"""Where each repo is checked out: the repos folder and the repos map."""

import json

import pytest

from seedline_runner.checkouts import Checkouts, CheckoutsError, load_checkouts, read_repos_map


@pytest.fixture
def repos(tmp_path):
    (tmp_path / "repos" / "apps" / "chess-academy").mkdir(parents=True)
    return tmp_path / "repos"


def test_without_a_folder_or_map_every_repo_runs_in_the_current_directory():
    checkouts = Checkouts()

    assert checkouts.locate("apps/chess-academy") is None
    assert checkouts.refusal("apps/chess-academy", "Your Mac mini") is None


def test_a_repo_is_found_under_the_repos_folder_by_its_name(repos):
    checkouts = load_checkouts(repos, None)

    assert checkouts.locate("apps/chess-academy") == repos / "apps" / "chess-academy"
    assert checkouts.refusal("apps/chess-academy", "Your Mac mini") is None


@pytest.mark.parametrize("repo", ["apps/go-club", "../repos/apps/chess-academy", "/etc", "a/./b"])
def test_a_repo_not_checked_out_there_is_refused_naming_it_and_the_machine(repos, repo):
    reason = load_checkouts(repos, None).refusal(repo, "Your Mac mini")

    assert reason is not None
    assert repo in reason and "Your Mac mini" in reason


def test_the_map_wins_and_takes_relative_paths_from_its_own_folder(repos, tmp_path):
    (tmp_path / "elsewhere").mkdir()
    repos_map = tmp_path / "repos.toml"
    repos_map.write_text('"apps/chess-academy" = "elsewhere"\n"web/site" = "/nowhere/site"\n')

    checkouts = load_checkouts(repos, repos_map)

    assert checkouts.locate("apps/chess-academy") == (tmp_path / "elsewhere").resolve()
    assert checkouts.locate("web/site") is None  # mapped, but not there
    assert "web/site" in checkouts.refusal("web/site", "Your Mac mini")


def test_a_json_map_reads_the_same(tmp_path):
    (tmp_path / "chess").mkdir()
    repos_map = tmp_path / "repos.json"
    repos_map.write_text(json.dumps({"apps/chess-academy": str(tmp_path / "chess")}))

    assert read_repos_map(repos_map) == {"apps/chess-academy": (tmp_path / "chess").resolve()}


@pytest.mark.parametrize(
    ("name", "text", "words"),
    [
        ("repos.toml", "apps = [1, 2", "not valid TOML"),
        ("repos.json", "{", "not valid JSON"),
        ("repos.json", "[]", "must map each repo"),
        ("repos.toml", '"apps/x" = 3', "must name a folder"),
        ("missing.toml", None, "Cannot read"),
    ],
)
def test_a_map_that_cannot_be_used_says_why(tmp_path, name, text, words):
    path = tmp_path / name
    if text is not None:
        path.write_text(text)

    with pytest.raises(CheckoutsError, match=words):
        read_repos_map(path)


def test_a_repos_folder_that_is_not_there_is_an_error(tmp_path):
    with pytest.raises(CheckoutsError, match="not a folder"):
        load_checkouts(tmp_path / "nope", None)
