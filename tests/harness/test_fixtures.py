from pathlib import Path

import pytest

from runner.base.errors import FixtureError
from runner.harness.fixtures import collect_fixture_paths, load_fixture, parse_fixture
from runner.tools.contracts import ContractSet
from tests.support.paths import FIXTURES


def write(tmp_path: Path, text: str, name: str = "f.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_every_shipped_fixture_loads(contracts: ContractSet) -> None:
    paths = collect_fixture_paths([FIXTURES])
    assert len(paths) >= 8
    for path in paths:
        assert load_fixture(path, contracts).expect is not None, path


def test_every_shipped_fixture_has_a_name_of_its_own(contracts: ContractSet) -> None:
    """`grade --stored` groups runs by fixture name: two fixtures of one name, run by `make run`,
    were graded as two trials of one (a false pass^2, 47 fixtures where 48 ran)."""
    folders = [FIXTURES, *(p for p in FIXTURES.iterdir() if p.is_dir())]
    paths = collect_fixture_paths(folders)
    names = [load_fixture(path, contracts).name for path in paths]
    assert len(paths) >= 48
    assert sorted(n for n in set(names) if names.count(n) > 1) == []


def test_malformed_yaml_names_the_line(tmp_path: Path) -> None:
    path = write(tmp_path, "name: x\ntask: [unclosed\n")
    with pytest.raises(FixtureError) as info:
        parse_fixture(path)
    assert "not valid YAML at line" in str(info.value) and str(path) in str(info.value)


def test_malformed_json_names_the_line(tmp_path: Path) -> None:
    path = write(tmp_path, '{"name": "x",\n oops}', "f.json")
    with pytest.raises(FixtureError, match="not valid JSON at line 2"):
        parse_fixture(path)


def test_schema_errors_are_listed_together(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "name: Bad Name\ndescription: d\ntask: t\ntenant: x\nprincipal: {id: a, scopes: []}\n"
        "tools: [search_flights]\nmodel: [{final: done, tool_calls: [{name: a}]}]\nsurprise: 1\n",
    )
    with pytest.raises(FixtureError) as info:
        parse_fixture(path)
    message = str(info.value)
    assert (
        "name:" in message
        and "surprise" in message
        and "exactly one of tool_calls or final" in message
    )
    assert "\n" not in message


def test_outcome_needs_exactly_one_form(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "name: x\ndescription: d\ntask: t\ntenant: x\nprincipal: {id: a, scopes: []}\n"
        "tools: [search_flights]\nmodel: [{final: done}]\n"
        "environment: {search_flights: [{timeout: true, fail: crash}]}\n",
    )
    with pytest.raises(FixtureError, match="exactly one of respond"):
        parse_fixture(path)


def test_unknown_tool_in_fixture_is_refused(tmp_path: Path, contracts: ContractSet) -> None:
    path = write(
        tmp_path,
        "name: x\ndescription: d\ntask: t\ntenant: x\nprincipal: {id: a, scopes: []}\n"
        "tools: [teleport]\nmodel: [{final: done}]\n",
    )
    with pytest.raises(FixtureError, match="tools without a contract: teleport"):
        load_fixture(path, contracts)


def test_when_must_name_a_result_class(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "name: x\ndescription: d\ntask: t\ntenant: x\nprincipal: {id: a, scopes: []}\n"
        "tools: [search_flights]\nmodel: [{when: sunny, final: done}]\n",
    )
    with pytest.raises(FixtureError, match="'sunny' is not a result class"):
        parse_fixture(path)


def test_missing_path_is_a_fixture_error(tmp_path: Path) -> None:
    with pytest.raises(FixtureError, match="no such file"):
        collect_fixture_paths([tmp_path / "nope.yaml"])
    with pytest.raises(FixtureError, match="no fixture files"):
        collect_fixture_paths([tmp_path])


def test_every_problem_is_named_at_once(tmp_path: Path, contracts: ContractSet) -> None:
    path = write(
        tmp_path,
        "name: x\ndescription: d\ntask: t\ntenant: x\nprincipal: {id: a, scopes: []}\n"
        "tools: [nope_tool]\nmodel: [{final: done}]\n"
        "environment: {other_tool: [{timeout: true}]}\n",
    )
    with pytest.raises(FixtureError) as info:
        load_fixture(path, contracts)
    message = str(info.value)
    assert "tools without a contract: nope_tool" in message
    assert "environment scripts tools not in tools: other_tool" in message
