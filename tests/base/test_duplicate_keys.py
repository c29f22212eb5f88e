"""A document that names one key twice is refused, naming the key, in every format we read.

`json` and PyYAML keep the last of two equal keys without a word, so a fixture's second
`expect:` or a contract's second `properties` silently replaced the first.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from runner.base._documents import DocumentProblem, load_json, load_yaml
from runner.base.errors import ConfigError, ContractError, FixtureError
from runner.cli import main
from runner.core.policy import Policy
from runner.harness.fixtures import load_fixture
from runner.service.config import ServiceConfig
from runner.tools.contracts import ContractSet, load_contract_file
from runner.tools.mcp.config import McpConfig
from tests.support.paths import FIXTURES, ROOT

CONTRACTS = ROOT / "contracts"


def test_yaml_names_the_repeated_key_and_its_line() -> None:
    with pytest.raises(DocumentProblem, match=r"key 'b' appears twice \(line 3\)") as caught:
        load_yaml("a: 1\nb: 2\nb: 3\n")
    assert caught.value.line == 3


def test_yaml_nested_mappings_are_checked_too() -> None:
    with pytest.raises(DocumentProblem, match="'x' appears twice"):
        load_yaml("outer:\n  - {x: 1, x: 2}\n")


def test_yaml_keys_equal_after_construction_are_the_same_key() -> None:
    with pytest.raises(DocumentProblem, match="appears twice"):
        load_yaml("1: a\n0x1: b\n")  # both are the integer 1


def test_yaml_merge_keys_still_override_on_purpose() -> None:
    document = load_yaml("base: &b {x: 1, y: 2}\nchild:\n  <<: *b\n  x: 3\n")
    assert document["child"] == {"x": 3, "y": 2}


def test_yaml_without_repeats_reads_as_safe_load_does() -> None:
    for path in sorted(FIXTURES.glob("*.yaml")):
        text = path.read_text()
        assert load_yaml(text) == yaml.safe_load(text), path


def test_json_names_the_repeated_key() -> None:
    with pytest.raises(DocumentProblem, match="key 'k' appears twice in one object"):
        load_json('{"a": {"k": 1, "k": 2}}')
    assert load_json('{"a": {"k": 1}, "b": [1, {"k": 2}]}') == {"a": {"k": 1}, "b": [1, {"k": 2}]}


def test_a_fixture_with_two_expect_blocks_is_refused(
    tmp_path: Path, contracts: ContractSet
) -> None:
    original = (FIXTURES / "read_only_success.yaml").read_text()
    assert "\nexpect:" in original
    path = tmp_path / "twice.yaml"
    path.write_text(original + "\nexpect:\n  terminal: abstain\n")
    with pytest.raises(FixtureError, match="'expect' appears twice"):
        load_fixture(path, contracts)
    assert main(["fixtures", "check", str(path)]) == 2


def test_a_json_fixture_with_a_repeated_key_is_refused(
    tmp_path: Path, contracts: ContractSet
) -> None:
    path = tmp_path / "twice.json"
    path.write_text('{"name": "a", "name": "b"}')
    with pytest.raises(FixtureError, match="'name' appears twice"):
        load_fixture(path, contracts)


def test_a_contract_with_a_repeated_key_is_refused(tmp_path: Path) -> None:
    original = json.loads((CONTRACTS / "hold_room.json").read_text())
    text = json.dumps(original)
    assert text.startswith("{")
    path = tmp_path / "hold_room.json"
    assert "name" in original
    path.write_text('{"name": "shadowed", ' + text[1:])
    with pytest.raises(ContractError, match="'name' appears twice"):
        load_contract_file(path, {})


@pytest.mark.parametrize(
    ("load", "text"),
    [
        (Policy.load, "retry:\n  max_attempts: 2\nretry:\n  max_attempts: 9\n"),
        (ServiceConfig.load, "api_keys: []\napi_keys: []\n"),
        (McpConfig.load, "servers: {}\nservers: {}\n"),
    ],
    ids=["policy", "service", "mcp"],
)
def test_config_files_refuse_a_repeated_key(tmp_path: Path, load: object, text: str) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(text)
    assert callable(load)
    with pytest.raises(ConfigError, match=r"appears twice \(line 3\)|appears twice \(line 2\)"):
        load(path)
