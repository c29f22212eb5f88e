"""Database URLs: telling one from a SQLite path, and naming one without its password (for every
message and log line). Free of psycopg, so the command line can tell before importing it."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit


def is_database_url(value: str) -> bool:
    """Whether `value` names a PostgreSQL database rather than a SQLite file."""
    return value.startswith(("postgresql://", "postgres://"))


def hide_password(url: str) -> str:
    """`url` with any password replaced by `***` (in the netloc and in a `password=` query)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<a database URL that cannot be parsed>"
    netloc = parts.netloc
    if "@" in netloc:
        credentials, _, host = netloc.rpartition("@")
        user = credentials.partition(":")[0]
        netloc = f"{user}:***@{host}" if ":" in credentials else f"{user}@{host}"
    query = "&".join(
        "password=***" if item.lower().startswith("password=") else item
        for item in parts.query.split("&")
        if item
    )
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def password_of(url: str) -> str | None:
    """The password `url` carries, if any (to scrub it from foreign error text)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    if parts.password:
        return parts.password
    for item in parts.query.split("&"):
        if item.lower().startswith("password="):
            return item.partition("=")[2] or None
    return None
