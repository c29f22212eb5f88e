"""Each asserted format decides as its standard says, on the cases the JSON Schema suite picks.

The cases are the key ones of the draft 2020-12 optional format tests (valid and invalid), with
the standard each follows; `tests/tools/test_fast_validation.py` proves both validators agree on
them.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runner.tools import _formats as formats
from runner.tools._formats import ASSERTED_FORMATS, unasserted_formats

CASES: dict[str, tuple[list[str], list[str]]] = {
    "date": (
        ["1963-06-19", "2020-02-29", "0400-02-29", "0001-01-01"],
        ["2021-02-29", "2100-02-29", "2020-04-31", "1998-1-20", "2013-350", "0000-01-01",
         "1963-06-1\u09ea", "2024-01-15 ", " 2024-01-15", "2020-01-01\n", "+2020-01-01",
         "20230328"],
    ),
    "date-time": (
        ["1963-06-19T08:30:06.283185Z", "1937-01-01T12:00:27.87+00:20", "1963-06-19t08:30:06z",
         "1998-12-31T23:59:60Z", "1998-12-31T15:59:60.123-08:00",
         "1985-04-12T00:59:59.999999999999999Z"],
        ["1985-04-12T23:20:50Z\n", "1998-12-31T23:59:61Z", "1998-12-31T23:58:60Z",
         "1998-12-31T22:59:60Z", "1990-02-31T15:59:59.123-08:00", "1990-12-31T15:59:59-24:00",
         "1963-06-19T08:30:06.28123+01:00Z", "1990-12-31T24:00:00Z", "2013-350T01:01:01",
         "1963-06-11T0\u09ea:00:00Z", "1985-04-12T23:20:50+01", "2016-12-31T24:59:60+01:00",
         "1963-06-19 08:30:06Z"],
    ),
    "time": (
        ["08:30:06Z", "23:59:60Z", "01:29:60+01:30", "00:29:60-23:30", "12:34:56-00:00",
         "08:30:06z", "23:20:50.52Z"],
        ["22:59:60Z", "23:59:60+01:00", "23:59:60-00:30", "24:00:00Z", "00:00:61Z",
         "01:02:03+24:00", "01:02:03Z+00:30", "12:00:00", "08:30:06 PST", "1\u09e8:00:00Z",
         "08:30:06Z\n"],
    ),
    "duration": (
        ["P4DT12H30M5S", "P4Y", "PT0S", "P1M", "PT36H", "P2W", "P1Y2M", "PT1M2S", "P01D"],
        ["PT1D", "P", "P1YT", "PT", "P2D1Y", "P1D2H", "P1Y2W", "P1Y2D", "PT1H2S", "PT0.5S",
         "P1D\n", "P\u09e8Y", "-P1D", "P1WT1H"],
    ),
    "email": (
        ["joe.bloggs@example.com", "te~st@example.com", '"joe bloggs"@example.com',
         '"joe..bloggs"@example.com', '"joe@bloggs"@example.com', "joe.bloggs@[127.0.0.1]",
         "joe.bloggs@[IPv6:::1]", "te.s.t@example.com"],
        ["2962", ".test@example.com", "test.@example.com", "te..st@example.com",
         "joe.bloggs@invalid=domain.com", "joe.bloggs@[127.0.0.300]",
         "user1@oceania.org, user2@oceania.org",
         '"Winston Smith" <winston.smith@recdep.minitrue> (Records Department)',
         "@example.com", "joe.bloggs@", "joe bloggs@example.com", "joe@example.com\n"],
    ),
    "hostname": (
        ["www.example.com", "hostname", "1host", "host-name", "a--b.com",
         "xn--9n2bp8q.xn--9t4b11yi5a", "xn--ll-0ea", "a" * 63 + ".com"],
        ["", ".", ".example", "example.", "-hostname", "hostname-", "host_name",
         "a" * 64 + ".com", ".".join(["a" * 63] * 4), "example.com\n", "\u212aelvin.example.com",
         "xn--X", "xn--al-0ea", "XN--aa---o47jg78q", "example\uff0ecom"],
    ),
    "ipv4": (
        ["192.168.0.1", "0.0.0.0", "255.255.255.255"],
        ["127.0.0.0.1", "256.256.256.256", "127.1", "0x7f000001", "087.10.0.1", "1\u09e87.0.0.1",
         "192.168.0.1\n", "192.168.1.0/24", " 192.168.0.1", "::ffff:192.168.0.1"],
    ),
    "ipv6": (
        ["::1", "::", "d6::", "1:d6::42", "1::d6:192.168.0.1", "::ffff:192.168.0.1",
         "1:2:3:4:5:6:7:8"],
        ["12345::", "::laptop", "1::d6::42", "1:2:3:4:5:::8", "1:2:3:4:5:6:7", "127.0.0.1",
         "fe80::/64", "fe80::a%eth1", "[::1]", "::1\n", "::ffff:192.168.0.01",
         "1:2::192.16\u09ea.0.1"],
    ),
    "uri": (
        ["http://foo.bar/?baz=qux#quux", "http://foo.com/blah_(wikipedia)_blah#cite-1",
         "http://-.~_!$&'()*+,;=:%40:80%2f::::::@example.com", "ldap://[2001:db8::7]/c=GB?one",
         "mailto:John.Doe@example.com", "tel:+1-816-555-1212", "urn:oasis:names:docbook:4.1.2",
         "http://999.999.999.999/"],
        ["//foo.bar/?baz=qux#quux", "/abc", "\\\\WINDOWS\\fileshare", "abc",
         "http:// shouldfail.com", "bar,baz:foo", "https://[@example.org/test.txt", "https://example.org/foobar\u00ae.txt",
         "https://example.org/foobar\\.txt", "https://example.org/foobar<>.txt",
         "https://example.org/foobar{}.txt", "https://example.org/foobar|.txt",
         "http://example.com/%6G", "http://example.com/%", "1http://example.com",
         "http://example.com:abc/path", "http://[::ffff:01.2.3.4]", "http:/[::1]",
         "http://example.com\n"],
    ),
    "uri-reference": (
        ["http://foo.bar/?baz=qux#quux", "//foo.bar/?baz=qux#quux", "/abc", "abc", "#fragment",
         "", "?query=1", "//", "./this:that"],
        ["\\\\WINDOWS\\fileshare", "#frag\\ment", "/foobar\u00ae.txt", "/%zz", "/a\"b", "/[::1]",
         "//example.com:abc/p", "//a@b@example.com/", "1:b", "/abc\n"],
    ),
    "uuid": (
        ["2EB8AA08-AA98-11EA-B4AA-73B441D16380", "00000000-0000-0000-0000-000000000000",
         "99c17cbb-656f-f64a-940f-1a4568f03487"],
        ["2eb8aa08-aa98-11ea-b4aa-73b441d1638", "2eb8aa08aa9811eab4aa73b441d16380",
         "urn:uuid:2eb8aa08-aa98-11ea-b4aa-73b441d16380", "{2eb8aa08-aa98-11ea-b4aa-73b441d16380}",
         "2eb8aa08-aa98-11ea-b4aa-73b441d16380\n", "\u09e8eb8aa08-aa98-11ea-b4aa-73b441d16380"],
    ),
    "json-pointer": (
        ["", "/", "/foo/bar~0/baz~1/%a", "/foo//bar", "/i\\j", "/foo\x00bar\n\tbaz"],
        ["/foo/bar~", "#", "#/", "/~2", "a", "0"],
    ),
    "relative-json-pointer": (
        ["1", "0/foo/bar", "0#", "120/foo/bar", "0//"],
        ["/foo/bar", "-1/foo/bar", "+1/foo/bar", "\u0661/foo", "0##", "01/a", "", "1#/foo",
         "1\n"],
    ),
}  # fmt: skip


def test_every_asserted_format_has_cases() -> None:
    assert set(CASES) == set(ASSERTED_FORMATS)


@pytest.mark.parametrize(
    ("form", "text"), [(form, text) for form, (valid, _) in CASES.items() for text in valid]
)
def test_valid(form: str, text: str) -> None:
    assert ASSERTED_FORMATS[form](text)


@pytest.mark.parametrize(
    ("form", "text"), [(form, text) for form, (_, invalid) in CASES.items() for text in invalid]
)
def test_invalid(form: str, text: str) -> None:
    assert not ASSERTED_FORMATS[form](text)


def test_only_format_keywords_in_schema_positions_count() -> None:
    schema = {
        "properties": {"format": {"type": "string"}, "when": {"format": "iri"}},
        "enum": [{"format": "not-a-schema"}],
        "oneOf": [{"items": {"format": "date"}}, {"$defs": {"x": {"format": "regex"}}}],
    }
    assert unasserted_formats(schema) == [
        ("/properties/when", "iri"),
        ("/oneOf/1/$defs/x", "regex"),
    ]


def test_without_idna_the_runner_refuses_to_start_and_says_why() -> None:
    """A checker's library missing is a clear error when contracts are first reachable (their
    module imported), never a format checked less."""
    code = "import sys; sys.modules['idna'] = None; from runner import load_contracts"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode != 0
    assert "ConfigError" in done.stderr and "needs idna" in done.stderr


def _two(top: int) -> st.SearchStrategy[str]:
    """Two digits from 00 to `top`, the edges most often, or any two digits."""
    edges = st.sampled_from(["00", "01", f"{top - 1:02d}", f"{top:02d}"])
    return edges | st.integers(0, top).map(lambda n: f"{n:02d}") | st.from_regex(r"\A[0-9]{2}\Z")


_STAMP_PARTS = st.tuples(
    st.sampled_from(["0000", "0001", "1900", "2000", "2023", "2024", "2100"])
    | st.from_regex(r"\A[0-9]{4}\Z"),
    _two(13),  # month
    _two(32),  # day
    _two(24),  # hour
    _two(60),  # minute
    _two(61),  # second
    st.sampled_from(["Z", "z", "+", "-"]),
    _two(24),
    _two(60),
)


@pytest.mark.slow
@settings(max_examples=300)
@given(_STAMP_PARTS)
def test_the_text_shortcut_agrees_with_the_arithmetic(parts: tuple[str, ...]) -> None:
    """`is_date`/`is_date_time` decide the common case on the digits' text; every timestamp
    of the right shape gets the answer the full check (`_valid_date`, `_valid_time`) gives."""
    year, month, day, hour, minute, second, zone, off_hour, off_minute = parts
    sign = None if zone in "Zz" else zone
    offset = zone if sign is None else f"{zone}{off_hour}:{off_minute}"
    off = (off_hour, off_minute) if sign else (None, None)
    date_ok = formats._valid_date(year, month, day)
    time_ok = formats._valid_time(hour, minute, second, sign, *off)
    assert formats.is_date(f"{year}-{month}-{day}") == date_ok
    stamp = f"{year}-{month}-{day}T{hour}:{minute}:{second}{offset}"
    assert formats.is_date_time(stamp) == (date_ok and time_ok)
