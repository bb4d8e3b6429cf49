import pytest

from portal.env import ImproperlyConfiguredEnv, env_bool, env_int, env_list, parse_database_url


def test_it_parses_a_postgres_url_into_django_settings():
    db = parse_database_url("postgres://alice:s%40cret@db.example:5433/portal?sslmode=require")
    assert db["ENGINE"] == "django.db.backends.postgresql"
    assert (db["NAME"], db["USER"], db["PASSWORD"], db["HOST"], db["PORT"]) == (
        "portal",
        "alice",
        "s@cret",
        "db.example",
        "5433",
    )
    assert db["OPTIONS"] == {"sslmode": "require"}


def test_it_parses_relative_and_absolute_sqlite_urls():
    assert parse_database_url("sqlite:///var/x.db")["NAME"] == "var/x.db"
    assert parse_database_url("sqlite:////tmp/x.db")["NAME"] == "/tmp/x.db"


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("mysql://u@h/db", "unsupported scheme 'mysql'"),
        ("postgres://u@h:5432/", "names no database"),
        ("postgres://u@h:port/db", "port that is not a number"),
    ],
    ids=["unknown-scheme", "no-database-name", "bad-port"],
)
def test_it_rejects_a_bad_database_url_with_a_clear_message(url, message):
    with pytest.raises(ImproperlyConfiguredEnv, match=message):
        parse_database_url(url)


def test_it_reads_booleans_and_refuses_anything_else(monkeypatch):
    monkeypatch.setenv("FLAG", "yes")
    assert env_bool("FLAG", False) is True
    monkeypatch.setenv("FLAG", "off")
    assert env_bool("FLAG", True) is False
    monkeypatch.setenv("FLAG", "maybe")
    with pytest.raises(ImproperlyConfiguredEnv, match="FLAG='maybe' is not a boolean"):
        env_bool("FLAG", False)


def test_it_reads_integers_with_a_minimum(monkeypatch):
    monkeypatch.setenv("N", "12")
    assert env_int("N", 1, minimum=1) == 12
    monkeypatch.setenv("N", "ten")
    with pytest.raises(ImproperlyConfiguredEnv, match="not a whole number"):
        env_int("N", 1)
    monkeypatch.setenv("N", "0")
    with pytest.raises(ImproperlyConfiguredEnv, match="below the minimum of 1"):
        env_int("N", 1, minimum=1)


def test_it_splits_lists_on_commas(monkeypatch):
    monkeypatch.setenv("HOSTS", "a.example, b.example,,")
    assert env_list("HOSTS", []) == ["a.example", "b.example"]
