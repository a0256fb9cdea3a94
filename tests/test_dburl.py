"""One function masks a PostgreSQL URL or DSN in every spelling libpq accepts, and libpq's own error
texts about one (read from the real libpq, through psycopg)."""

from __future__ import annotations

import psycopg
import pytest

from pooler.journal.dburl import DbText, argument, is_postgres, masked, passwords

MASKED = {
    "postgresql://ops:Sekr3t@db.example:5432/pooler":
        "postgresql://ops:***@db.example:5432/pooler",
    "postgres://ops:Sekr3t@db.example/pooler":
        "postgres://ops:***@db.example/pooler",
    "postgresql://ops@db.example/pooler?password=Sekr3t":
        "postgresql://ops@db.example/pooler?password=***",
    "postgresql://ops@db.example/pooler?sslmode=require&password=Sekr3t&application_name=x":
        "postgresql://ops@db.example/pooler?sslmode=require&password=***&application_name=x",
    "postgresql://ops:Sek@r3t@db.example/pooler":
        "postgresql://ops:***@db.example/pooler",
    "postgresql://ops:Sek%zzr3t@db.example/pooler":
        "postgresql://ops:***@db.example/pooler",
    "host=db.example port=5432 password=Sekr3t dbname=pooler":
        "host=db.example port=5432 password=*** dbname=pooler",
    "host=db.example password = Sekr3t dbname=pooler":
        "host=db.example password = *** dbname=pooler",
    "host=db.example password='Sek r3t' dbname=pooler":
        "host=db.example password=*** dbname=pooler",
    r"host=db.example password='Sek \' r3t' dbname=pooler":
        "host=db.example password=*** dbname=pooler",
    'in URI: "postgresql://ops:Sekr3t@[db.example/pooler"':
        'in URI: "postgresql://ops:***@[db.example/pooler"',
    "postgresql://ops@db.example/pooler": "postgresql://ops@db.example/pooler",
}


@pytest.mark.parametrize("text", MASKED)
def test_a_password_is_masked_in_every_spelling(text: str) -> None:
    assert masked(text) == MASKED[text]


def test_the_passwords_of_a_url_are_its_values_as_written_decoded_and_split_at_an_unescaped_at() -> None:
    assert passwords("postgresql://ops:Sek%40r3t@h/db") == ["Sek%40r3t", "Sek@r3t"]
    assert passwords("postgresql://ops:Sek@r3t0@h/db") == ["Sek@r3t0", "Sek", "r3t0"]
    assert passwords("postgresql://ops@h/db?password=a%20b&x=1") == ["a%20b", "a b"]
    assert passwords(r"host=h password='a \' b' dbname=d") == ["a ' b"]
    assert passwords("postgresql://ops@h/db") == []
    assert passwords(None) == []


LIBPQ = {
    "postgresql://ops:Sekr3tPw@[127.0.0.1/db":
        'end of string reached when looking for matching "]" in IPv6 host address in URI: '
        '"postgresql://ops:***@[127.0.0.1/db"',
    "postgresql://ops:Sek%zzr3tPw@127.0.0.1/db": 'invalid percent-encoded token: "***"',
    "postgresql://ops:Sek@r3tPw@127.0.0.1:1/db":
        "failed to resolve host '***@127.0.0.1': [Errno -2] Name or service not known",
    "host=127.0.0.1 port=1 password='Sek r3t' dbname=db sslmode=nonsense":
        'connection is bad: invalid sslmode value: "nonsense"',
}


@pytest.mark.parametrize("url", LIBPQ)
def test_libpqs_error_text_about_a_url_is_masked(url: str) -> None:
    with pytest.raises(psycopg.Error) as caught:
        psycopg.connect(url, connect_timeout=2)
    assert DbText(url).error(caught.value) == LIBPQ[url]


def test_a_journal_value_is_postgres_by_its_scheme_or_as_a_keyword_dsn() -> None:
    assert is_postgres("postgresql://h/db")
    assert is_postgres("POSTGRES://h/db")
    assert is_postgres("host=db.example dbname=pooler")
    assert is_postgres("dbname=pooler")
    assert not is_postgres("journal.sqlite")
    assert not is_postgres("state/host.sqlite")
    assert not is_postgres(None)


def test_a_command_a_message_tells_to_run_names_the_journal_masked_and_quoted_for_the_shell() -> None:
    assert argument("postgresql://ops:Sekr3t@h/db") == "postgresql://ops:***@h/db"
    assert argument("host=h password=Sekr3t dbname=d") == "'host=h password=*** dbname=d'"
