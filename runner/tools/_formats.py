"""The string formats contracts may use, each checked by one strict function both validators share.

jsonschema asserts a format only when an optional library is installed, and several of those
libraries are looser than the standards (an e-mail is "contains @"; a date-time may end in a
newline and may not be a leap second). So the runner checks formats itself, one function per
format, against RFC 3339 (date, time, date-time, duration), RFC 5321 (email), RFC 1123 with IDNA
A-labels (hostname), RFC 3986 (uri, uri-reference), RFC 4122 (uuid) and RFC 6901 (json-pointer).
Every regular expression here is anchored with `fullmatch` and compiled ASCII-only: Python's `$`
also matches before a trailing newline, and its `\\d` matches any Unicode digit.

The reference validator (jsonschema) gets these functions through `format_checker()`; the compiled
one (jsonschema-rs) gets the same functions as its custom formats, so the two cannot part ways on
a format. A contract using any other format is refused when it loads (`unasserted_formats`).
"""

from __future__ import annotations

import functools
import ipaddress
import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final

from ..base.errors import ConfigError
from ._schema_walk import DATA_KEYWORDS as _DATA_KEYWORDS
from ._schema_walk import subschemas

if TYPE_CHECKING:  # jsonschema is imported when a contract is loaded, not with the package
    from jsonschema import FormatChecker

try:
    import idna
except ImportError as exc:  # a declared dependency; refuse to start rather than check less
    raise ConfigError(
        "format hostname (and email domains) needs idna: install runner's dependencies"
    ) from exc

_A = re.ASCII

# RFC 3339 section 5.6, as one expression each (these run on every timestamp a tool returns).
_DATE_PART: Final = r"(\d{4})-(\d{2})-(\d{2})"
_TIME_PART: Final = r"(\d{2}):(\d{2}):(\d{2})(?:\.\d+)?(?:[Zz]|([+-])(\d{2}):(\d{2}))"
_DATE: Final = re.compile(_DATE_PART, _A)
_TIME: Final = re.compile(_TIME_PART, _A)
_DATE_TIME: Final = re.compile(f"{_DATE_PART}[Tt]{_TIME_PART}", _A)
_DAYS_IN_MONTH: Final = (0, 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)
_LAST_MINUTE_OF_DAY: Final = 23 * 60 + 59


def _valid_date(year: str, month: str, day: str) -> bool:
    y, m, d = int(year), int(month), int(day)
    if y == 0 or not 1 <= m <= 12 or not 1 <= d <= _DAYS_IN_MONTH[m]:
        return False
    return m != 2 or d < 29 or (y % 4 == 0 and (y % 100 != 0 or y % 400 == 0))


def _valid_time(*parts: str | None) -> bool:
    """Second 60 only in the last minute of the day in UTC (a leap second)."""
    hour, minute, second = int(parts[0] or 0), int(parts[1] or 0), int(parts[2] or 0)
    sign, off_hour, off_minute = parts[3], int(parts[4] or 0), int(parts[5] or 0)
    if hour > 23 or minute > 59 or second > 60 or off_hour > 23 or off_minute > 59:
        return False
    offset = (off_hour * 60 + off_minute) * (-1 if sign == "-" else 1)
    return second < 60 or (hour * 60 + minute - offset) % 1440 == _LAST_MINUTE_OF_DAY


def _plainly_valid_date(year: str, month: str, day: str) -> bool:
    """The common case decided on the digits' text, no arithmetic: a month 01-12 and a day
    01-28 exist in every year but 0000. False means "ask `_valid_date`", not "invalid"."""
    return "01" <= month <= "12" and "01" <= day <= "28" and year != "0000"


def is_date(text: str) -> bool:
    found = _DATE.fullmatch(text)
    if found is None:
        return False
    year, month, day = found.groups()
    return _plainly_valid_date(year, month, day) or _valid_date(year, month, day)


def is_time(text: str) -> bool:
    found = _TIME.fullmatch(text)
    return found is not None and _valid_time(*found.groups())


def is_date_time(text: str) -> bool:
    found = _DATE_TIME.fullmatch(text)
    if found is None:
        return False
    year, month, day, hour, minute, second, sign, off_hour, off_minute = found.groups()
    if (  # the common case on the digits' text (no leap second, no day past 28): valid
        _plainly_valid_date(year, month, day)
        and hour <= "23"
        and minute <= "59"
        and second <= "59"
        and (sign is None or (off_hour <= "23" and off_minute <= "59"))
    ):
        return True
    return _valid_date(year, month, day) and _valid_time(
        hour, minute, second, sign, off_hour, off_minute
    )


# RFC 3339 appendix A (ISO 8601 durations), upper-case designators as ISO 8601 writes them.
_DUR_TIME: Final = r"T(?:\d+H(?:\d+M(?:\d+S)?)?|\d+M(?:\d+S)?|\d+S)"
_DUR_DATE: Final = rf"(?:\d+D|\d+M(?:\d+D)?|\d+Y(?:\d+M(?:\d+D)?)?)(?:{_DUR_TIME})?"
_DURATION: Final = re.compile(rf"P(?:{_DUR_DATE}|{_DUR_TIME}|\d+W)", _A)


def is_duration(text: str) -> bool:
    return _DURATION.fullmatch(text) is not None


_OCTET: Final = r"(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
_IPV4: Final = re.compile(rf"{_OCTET}(?:\.{_OCTET}){{3}}", _A)
_IPV6_CHARS: Final = re.compile(r"[0-9A-Fa-f:.]+", _A)


def is_ipv4(text: str) -> bool:
    """Dotted quad only: no leading zeros, no shorthand, nothing around it."""
    return _IPV4.fullmatch(text) is not None


def is_ipv6(text: str) -> bool:
    """RFC 4291 text form; no zone id, prefix length or brackets."""
    if _IPV6_CHARS.fullmatch(text) is None:
        return False
    try:
        ipaddress.IPv6Address(text)  # rejects leading zeros in an embedded IPv4 part too
    except ValueError:
        return False
    return True


_LABEL: Final = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?", _A)


def is_hostname(text: str) -> bool:
    """RFC 1123 labels joined by dots (no trailing dot); an `xn--` label must be a valid A-label."""
    if not text or len(text) > 253:
        return False
    for label in text.split("."):
        if _LABEL.fullmatch(label) is None:
            return False
        if label[2:4] == "--" and label[:2].lower() == "xn":
            try:
                idna.decode(label)
            except (idna.IDNAError, UnicodeError):
                return False
    return True


# RFC 5321 section 4.1.2 (Mailbox), without the obsolete and general address-literal forms.
_ATOM: Final = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+"
_LOCAL_PART: Final = re.compile(rf"{_ATOM}(?:\.{_ATOM})*|\"(?:[ !#-\[\]-~]|\\[ -~])*\"", _A)
_MAILBOX: Final = re.compile(r"(.+)@([^@]+)", re.DOTALL)


def is_email(text: str) -> bool:
    """One mailbox: a dot-string or quoted local part, then a hostname or an IP literal."""
    found = _MAILBOX.fullmatch(text)
    if found is None:
        return False
    local, domain = found.groups()
    if len(local) > 64 or _LOCAL_PART.fullmatch(local) is None:
        return False
    if domain.startswith("[") and domain.endswith("]"):
        literal = domain[1:-1]
        if literal[:5].lower() == "ipv6:":
            return is_ipv6(literal[5:])
        return is_ipv4(literal)
    return is_hostname(domain)


# RFC 3986 appendix A.
_UNRESERVED: Final = r"A-Za-z0-9._~\-"
_SUB_DELIMS: Final = r"!$&'()*+,;="
_PCT: Final = r"%[0-9A-Fa-f]{2}"
_PCHAR: Final = rf"(?:[{_UNRESERVED}{_SUB_DELIMS}:@]|{_PCT})"
_SEGMENT_NZ_NC: Final = rf"(?:[{_UNRESERVED}{_SUB_DELIMS}@]|{_PCT})+"
_QUERY: Final = rf"(?:{_PCHAR}|[/?])*"
_TAIL: Final = rf"(?:\?{_QUERY})?(?:#{_QUERY})?"
_ABS_OR_ROOTLESS: Final = rf"/?(?:{_PCHAR}+(?:/{_PCHAR}*)*)?"
_URI: Final = re.compile(
    rf"[A-Za-z][A-Za-z0-9+.-]*:(?://(?P<authority>[^/?#]*)(?:/{_PCHAR}*)*|{_ABS_OR_ROOTLESS}){_TAIL}",
    _A,
)
_RELATIVE_REF: Final = re.compile(
    rf"(?://(?P<authority>[^/?#]*)(?:/{_PCHAR}*)*"
    rf"|/(?:{_PCHAR}+(?:/{_PCHAR}*)*)?|(?:{_SEGMENT_NZ_NC}(?:/{_PCHAR}*)*)?){_TAIL}",
    _A,
)
_AUTHORITY: Final = re.compile(
    rf"(?:(?:[{_UNRESERVED}{_SUB_DELIMS}:]|{_PCT})*@)?"
    rf"(?:\[(?P<literal>[{_UNRESERVED}{_SUB_DELIMS}:]+)\]|(?:[{_UNRESERVED}{_SUB_DELIMS}]|{_PCT})*)"
    r"(?::[0-9]*)?",
    _A,
)
_IP_FUTURE: Final = re.compile(rf"[vV][0-9A-Fa-f]+\.[{_UNRESERVED}{_SUB_DELIMS}:]+", _A)


def _authority_ok(authority: str | None) -> bool:
    if authority is None:
        return True
    found = _AUTHORITY.fullmatch(authority)
    if found is None:
        return False
    literal = found.group("literal")
    return literal is None or is_ipv6(literal) or _IP_FUTURE.fullmatch(literal) is not None


def is_uri(text: str) -> bool:
    """An absolute URI (scheme required); ASCII only, every `%` a complete escape."""
    found = _URI.fullmatch(text)
    return found is not None and _authority_ok(found.group("authority"))


def is_uri_reference(text: str) -> bool:
    """A URI or a relative reference (which may be empty)."""
    if is_uri(text):
        return True
    found = _RELATIVE_REF.fullmatch(text)
    return found is not None and _authority_ok(found.group("authority"))


_UUID: Final = re.compile(r"[0-9A-Fa-f]{8}(?:-[0-9A-Fa-f]{4}){3}-[0-9A-Fa-f]{12}", _A)


def is_uuid(text: str) -> bool:
    return _UUID.fullmatch(text) is not None


_JSON_POINTER: Final = r"(?:/(?:[^/~]|~[01])*)*"
_POINTER: Final = re.compile(_JSON_POINTER, re.DOTALL)
_RELATIVE_POINTER: Final = re.compile(rf"(?:0|[1-9][0-9]*)(?:#|{_JSON_POINTER})", re.DOTALL)


def is_json_pointer(text: str) -> bool:
    return _POINTER.fullmatch(text) is not None


def is_relative_json_pointer(text: str) -> bool:
    return _RELATIVE_POINTER.fullmatch(text) is not None


ASSERTED_FORMATS: Final[Mapping[str, Callable[[str], bool]]] = {
    "date": is_date,
    "date-time": is_date_time,
    "time": is_time,
    "duration": is_duration,
    "email": is_email,
    "hostname": is_hostname,
    "ipv4": is_ipv4,
    "ipv6": is_ipv6,
    "uri": is_uri,
    "uri-reference": is_uri_reference,
    "uuid": is_uuid,
    "json-pointer": is_json_pointer,
    "relative-json-pointer": is_relative_json_pointer,
}
"""Every format a contract may use. Any other (idn-email, idn-hostname, iri, iri-reference,
uri-template, regex, custom names) is refused at load rather than silently accepted."""


# What the compiled validator may accept without calling back into Python (`with_shortcuts`):
# for each format, the ECMA-262 text of a plainly valid value (as `_plainly_valid_date` and the
# common case of `is_date_time` read it: a day up to 28, no leap second, a year other than 0000).
# Each accepts only what its format's function accepts; what it leaves out goes to the function.
_YEAR: Final = "(?:[1-9][0-9]{3}|0[1-9][0-9]{2}|00[1-9][0-9]|000[1-9])"
_PLAIN_DATE: Final = f"{_YEAR}-(?:0[1-9]|1[0-2])-(?:0[1-9]|1[0-9]|2[0-8])"
_PLAIN_TIME: Final = (
    "(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\\.[0-9]+)?"
    "(?:[Zz]|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])"
)
PLAIN_PATTERNS: Final[Mapping[str, str]] = {
    "date": f"^{_PLAIN_DATE}$",
    "date-time": f"^{_PLAIN_DATE}[Tt]{_PLAIN_TIME}$",
    "time": f"^{_PLAIN_TIME}$",
}
"""Format -> a pattern every match of which the format's function accepts."""


def with_shortcuts(schema: Any) -> Any:
    """A copy of `schema` in which each `format` with a plain pattern reads `anyOf: [{pattern},
    {format}]`: the same verdict, but a plainly valid value (every timestamp of an ordinary
    payload) is settled in the compiled validator, not by a call into Python per value
    (eleven of them a step were most of the result check). Where the object has an `anyOf`
    already, the pair is appended to its `allOf`, so no `$ref` pointer into the schema moves.
    """
    if isinstance(schema, list):
        return [with_shortcuts(item) for item in schema]
    if not isinstance(schema, Mapping):
        return schema
    copy = {
        key: value if key in _DATA_KEYWORDS else with_shortcuts(value)
        for key, value in schema.items()
    }
    name = copy.get("format")
    if not isinstance(name, str) or name not in PLAIN_PATTERNS:
        return copy
    del copy["format"]
    either = [{"pattern": PLAIN_PATTERNS[name]}, {"format": name}]
    if "anyOf" in copy:
        copy["allOf"] = [*copy.get("allOf", []), {"anyOf": either}]
    else:
        copy["anyOf"] = either
    return copy


@functools.cache
def format_checker() -> FormatChecker:
    """The reference validator's format checker: exactly `ASSERTED_FORMATS`, nothing else."""
    from jsonschema import FormatChecker  # noqa: PLC0415  # imported on first use (see above)

    checker = FormatChecker(formats=())
    for name, check in ASSERTED_FORMATS.items():
        # Formats apply to strings only; any other type passes, as the specification says.
        checker.checks(name)(lambda value, check=check: not isinstance(value, str) or check(value))
    return checker


def unasserted_formats(schema: Any) -> list[tuple[str, str]]:
    """(where, format) for every `format` in `schema` that the runner cannot assert."""
    return [
        (where, str(sub["format"]))
        for where, sub in subschemas(schema)
        if "format" in sub
        and not (isinstance(sub["format"], str) and sub["format"] in ASSERTED_FORMATS)
    ]
