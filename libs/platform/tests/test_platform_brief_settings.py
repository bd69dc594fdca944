"""SEEDLINE_BRIEF_BUDGETS: a brief budget per engine, checked when the settings are read."""

import pytest

from seedline_core.brief import DEFAULT_BUDGET, Budget
from seedline_platform.settings import Settings, SettingsError

NAME = "SEEDLINE_BRIEF_BUDGETS"


def test_engines_not_named_get_the_default_budget() -> None:
    settings = Settings.from_env({NAME: "claude=120:40000, codex=80:20000"})
    assert settings.brief_budget("claude") == Budget(120, 40_000)
    assert settings.brief_budget("codex") == Budget(80, 20_000)
    assert settings.brief_budget("scripted") == DEFAULT_BUDGET == Budget(60, 12_000)
    assert Settings.from_env({}).brief_budget("claude") == DEFAULT_BUDGET
    assert Settings.from_env({NAME: " , "}).brief_budgets == ()


def test_the_limits_themselves_are_accepted() -> None:
    settings = Settings.from_env({NAME: "small=11:3200,large=1000:100000"})
    assert settings.brief_budget("small") == Budget(11, 3200)
    assert settings.brief_budget("large") == Budget(1000, 100_000)


@pytest.mark.parametrize("value, says", [
    ("claude", "must be ENGINE=ROWS:CHARS pairs"),
    ("claude=120", "must be ENGINE=ROWS:CHARS pairs"),
    ("=120:40000", "must be ENGINE=ROWS:CHARS pairs"),
    ("claude=many:40000", "must be whole numbers"),
    ("claude=120:40000,claude=60:12000", "names claude twice"),
    ("claude=10:40000", "rows of claude must be between 11 and 1000 (room for the person's"),
    ("claude=1001:40000", "rows of claude must be between 11 and 1000 (a brief that travels"),
    ("claude=60:3199", "characters of claude must be between 3200 and 100000"),
    ("claude=60:100001", "characters of claude must be between 3200 and 100000"),
])
def test_a_budget_that_cannot_be_used_is_refused_naming_the_variable(value, says) -> None:
    with pytest.raises(SettingsError) as refused:
        Settings.from_env({NAME: value})
    assert str(refused.value).startswith(NAME)
    assert says in str(refused.value)
