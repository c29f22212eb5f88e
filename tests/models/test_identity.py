"""The model identity a run header records (no secrets), and which model a resume may go on with."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from runner.base.errors import ResumeRefused
from runner.harness.fixtures import load_fixture
from runner.models.anthropic import AnthropicModel
from runner.models.identity import ModelIdentity, identity_of, redact_url
from runner.models.live import model_for_resume
from runner.models.openai import OpenAIChatModel
from runner.models.scripted import ScriptedModel
from runner.record.trace import read_log
from runner.store import FanoutStore, JsonlLog, MemoryStore, SqliteStore
from runner.tools.contracts import ContractSet
from runner.travel.scenario import run_fixture
from tests.support.llm_server import RecordedLLMServer
from tests.support.paths import FIXTURES

LIVE = ModelIdentity(provider="openai", name="gpt-x", base_url="http://127.0.0.1:9/v1")


@pytest.mark.parametrize(
    ("url", "redacted"),
    [
        ("https://user:s3cret@api.example.com:8443/v1/?key=s3cret#s3cret",
         "https://api.example.com:8443/v1"),
        ("http://127.0.0.1:8080/v1", "http://127.0.0.1:8080/v1"),
        ("http://[::1]:8080/v1?api-version=2024", "http://[::1]:8080/v1"),
        (None, None),
    ],
)  # fmt: skip
def test_a_base_url_is_recorded_without_user_info_query_or_fragment(
    url: str | None, redacted: str | None
) -> None:
    assert redact_url(url) == redacted


def test_adapters_declare_their_identity_without_the_key() -> None:
    openai = OpenAIChatModel("gpt-x", base_url="http://u:pw@h:1/v1/?t=k", api_key="key-1",
                             fallback_model="gpt-y")  # fmt: skip
    assert identity_of(openai) == ModelIdentity(
        provider="openai", name="gpt-x", base_url="http://h:1/v1", fallback="gpt-y"
    )
    anthropic = AnthropicModel("claude-x", base_url="http://h:2", api_key="key-2")
    assert identity_of(anthropic) == ModelIdentity(
        provider="anthropic", name="claude-x", base_url="http://h:2"
    )
    assert identity_of(ScriptedModel([])).provider == "scripted"
    assert identity_of(object()) == ModelIdentity(provider="custom", name="builtins.object")
    assert "key-" not in repr([identity_of(openai), identity_of(anthropic)])


def test_the_header_and_the_log_name_the_model_without_secrets(
    server: RecordedLLMServer,
    contracts: ContractSet,
    tmp_path: Path,
) -> None:
    fixture = load_fixture(FIXTURES / "read_only_success.yaml", contracts)
    host = server.url.removeprefix("http://")
    model = OpenAIChatModel("fixture-read_only_success", base_url=f"http://u:s3cret@{host}/v1",
                            api_key="test-key")  # fmt: skip
    store = MemoryStore()
    log = tmp_path / "runs.jsonl"
    outcome = run_fixture(fixture, contracts, FanoutStore(store, JsonlLog(log)), model=model)
    assert outcome.passed
    header = store.header(outcome.result.run_id)
    assert header is not None
    expected = ModelIdentity(
        provider="openai", name="fixture-read_only_success", base_url=f"{server.url}/v1"
    )
    assert header.model == expected
    assert read_log(log)[0].header.model == expected
    assert "s3cret" not in log.read_text() and "test-key" not in log.read_text()


def test_a_scripted_run_records_the_script(contracts: ContractSet) -> None:
    fixture = load_fixture(FIXTURES / "read_only_success.yaml", contracts)
    store = MemoryStore()
    outcome = run_fixture(fixture, contracts, store)
    header = store.header(outcome.result.run_id)
    assert header is not None and header.model is not None
    assert header.model.provider == "scripted"


def test_headers_stored_before_the_identity_still_load(
    contracts: ContractSet, tmp_path: Path
) -> None:
    fixture = load_fixture(FIXTURES / "read_only_success.yaml", contracts)
    db, log = tmp_path / "runs.sqlite", tmp_path / "runs.jsonl"
    store = SqliteStore(db)
    run_id = run_fixture(fixture, contracts, FanoutStore(store, JsonlLog(log))).result.run_id
    store.close()
    import sqlite3  # noqa: PLC0415  # editing the file as an older runner left it

    conn = sqlite3.connect(db)
    (text,) = conn.execute("SELECT header FROM runs").fetchone()
    old = {k: v for k, v in json.loads(text).items() if k != "model"}
    conn.execute("UPDATE runs SET header = ?", (json.dumps(old),))
    conn.commit()
    conn.close()
    lines = log.read_text().splitlines()
    started = {k: v for k, v in json.loads(lines[0]).items() if k != "model"}
    log.write_text("\n".join([json.dumps(started), *lines[1:]]) + "\n")
    store = SqliteStore(db)
    header = store.header(run_id)
    store.close()
    assert header is not None and header.model is None
    assert read_log(log)[0].header.model is None


def test_a_live_model_is_rebuilt_from_the_record() -> None:
    rebuilt = model_for_resume("r1", LIVE, None, replied_live=True)
    assert isinstance(rebuilt, OpenAIChatModel)
    assert identity_of(rebuilt) == LIVE


def test_a_model_that_cannot_be_rebuilt_is_refused_not_replaced(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    keyless = ModelIdentity(provider="openai", name="gpt-x")  # the provider's own endpoint
    with pytest.raises(ResumeRefused, match=r"r1: it was driven by openai:gpt-x.*OPENAI_API_KEY"):
        model_for_resume("r1", keyless, None, replied_live=True)
    monkeypatch.setitem(sys.modules, "anthropic", None)  # the SDK is not installed
    claude = ModelIdentity(provider="anthropic", name="claude-x", base_url="http://h:1")
    with pytest.raises(ResumeRefused, match=r"pip install 'runner-fsm\[anthropic\]'"):
        model_for_resume("r1", claude, None, replied_live=True)
    custom = ModelIdentity(provider="custom", name="my.Adapter")
    with pytest.raises(ResumeRefused, match="resume it with that adapter"):
        model_for_resume("r1", custom, None, replied_live=True)


def test_a_given_model_must_be_the_recorded_one() -> None:
    same = OpenAIChatModel("gpt-x", base_url="http://127.0.0.1:9/v1/", api_key="k")
    assert model_for_resume("r1", LIVE, same, replied_live=True) is same
    other = OpenAIChatModel("gpt-x", base_url="http://127.0.0.1:10/v1", api_key="k")
    with pytest.raises(
        ResumeRefused, match=re.escape("not openai:gpt-x at http://127.0.0.1:10/v1")
    ):
        model_for_resume("r1", LIVE, other, replied_live=True)
    scripted = ModelIdentity(provider="scripted", name="fixture-script")
    assert model_for_resume("r1", scripted, None, replied_live=False) is None
    with pytest.raises(ResumeRefused, match="scripted:fixture-script, not openai:gpt-x"):
        model_for_resume("r1", scripted, same, replied_live=False)


def test_an_old_header_of_a_live_run_needs_the_model_named() -> None:
    with pytest.raises(ResumeRefused, match="give it with --model"):
        model_for_resume("r1", None, None, replied_live=True)
    assert model_for_resume("r1", None, None, replied_live=False) is None  # the script's run
    given = OpenAIChatModel("gpt-x", base_url="http://h:1/v1", api_key="k")
    assert model_for_resume("r1", None, given, replied_live=True) is given
