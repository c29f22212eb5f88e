"""The docs site builds with `--strict` (no warning, no broken link or reference), offline, and
what it generates covers what it is generated from: every subcommand of the parser, every
operation of the OpenAPI document, every name of `runner.__all__`, every class of the error tree.

The build runs in this process with every outbound connection refused, so a plugin or hook that
downloads anything at build time fails it; the built pages are then read for anything a reader's
browser would fetch from another host (a script, a stylesheet, a font, an image).
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import re
import socket
from collections.abc import Iterable, Iterator
from html.parser import HTMLParser
from pathlib import Path
from types import ModuleType
from typing import get_args

import pytest
from mkdocs.commands.build import build
from mkdocs.config import load_config
from pydantic import BaseModel

import runner
from runner.base import errors
from runner.cli import _parser, main
from runner.core.budget import Limits
from runner.core.machine import Trigger
from runner.core.policy import ApprovalRules, Backoff, Policy
from runner.core.result_classes import ResultClass
from runner.core.states import State
from runner.harness.fixtures import ApprovalScript, ChildScript, Expect, Fixture, ToolOutcome
from runner.models.scripted import ScriptedTurn
from runner.record.recording import RecordedOutput, RecordedTurn
from runner.record.trace import RunHeader, RunSummary
from runner.service.config import ApiKey, LiveConfig, PrincipalConfig, ProviderConfig, ServiceConfig
from runner.tools.contracts import RESERVED_ARGUMENTS, Contract
from tests.support.paths import ROOT

CONFIG = ROOT / "mkdocs.yml"
API_PAGE = ROOT / "docs" / "reference" / "python-api.md"

REMOTE = re.compile(r"^(https?:)?//", re.IGNORECASE)
"""A reference to another host (`//host/...` is one too: the page's scheme, another host)."""

FETCHED_LINKS = {"stylesheet", "preload", "modulepreload", "preconnect", "dns-prefetch", "icon"}
"""`<link rel=...>` kinds a browser fetches (or connects for) on its own, unlike a link to click."""

FETCHED_ATTRIBUTES = {
    "script": "src",
    "img": "src",
    "iframe": "src",
    "source": "src",
    "audio": "src",
    "video": "src",
    "embed": "src",
    "object": "data",
}


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    out = tmp_path_factory.mktemp("site")

    def refuse(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("the docs build opened a network connection")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(socket.socket, "connect", refuse)
        patch.setattr(socket, "create_connection", refuse)
        patch.setenv("NO_MKDOCS_2_WARNING", "1")  # Material's notice of its own end of life
        build(load_config(str(CONFIG), strict=True, site_dir=str(out)))  # Abort on any warning
    yield out


def _pages(site: Path) -> list[Path]:
    return sorted(site.rglob("*.html"))


class _Fetches(HTMLParser):
    """What a page makes the browser fetch from another host, and any Mermaid diagram (Material's
    script loads Mermaid from a CDN for one)."""

    def __init__(self) -> None:
        super().__init__()
        self.remote: list[str] = []
        self.mermaid = False
        self._in_style = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {name: value or "" for name, value in attrs}
        if "mermaid" in values.get("class", "").split():
            self.mermaid = True
        if tag == "link":
            rels = set(values.get("rel", "").lower().split())
            if rels & FETCHED_LINKS and REMOTE.match(values.get("href", "")):
                self.remote.append(f"<link rel={values['rel']!r} href={values['href']!r}>")
        attribute = FETCHED_ATTRIBUTES.get(tag)
        if attribute and REMOTE.match(values.get(attribute, "")):
            self.remote.append(f"<{tag} {attribute}={values[attribute]!r}>")
        if REMOTE.match(values.get("srcset", "")):
            self.remote.append(f"<{tag} srcset={values['srcset']!r}>")
        self.remote += _css_fetches(values.get("style", ""))
        self._in_style = tag == "style"

    def handle_endtag(self, tag: str) -> None:
        if tag == "style":
            self._in_style = False

    def handle_data(self, data: str) -> None:
        if self._in_style:
            self.remote += _css_fetches(data)


_CSS_URL = re.compile(r"""(?:@import\s+|url\(\s*)["']?((?:https?:)?//[^"')\s]+)""", re.IGNORECASE)


def _css_fetches(css: str) -> list[str]:
    """`@import` and `url(...)` of another host (a `data:` URI's inner `xmlns` is not one)."""
    return [f"css {match.group(1)}" for match in _CSS_URL.finditer(css)]


def test_the_site_builds_strictly_with_every_page(site: Path) -> None:
    assert (site / "index.html").is_file()
    for page in ("reference/cli", "reference/http-api", "reference/exceptions", "changelog"):
        assert (site / page / "index.html").is_file(), page


def test_no_page_fetches_a_script_stylesheet_font_or_image_from_another_host(
    site: Path,
) -> None:
    found = []
    for page in _pages(site):
        reader = _Fetches()
        reader.feed(page.read_text(encoding="utf-8"))
        found += [f"{page.relative_to(site)}: {what}" for what in reader.remote]
        if reader.mermaid:
            found.append(f"{page.relative_to(site)}: a Mermaid diagram (loaded from a CDN)")
    for css in sorted(site.rglob("*.css")):
        found += [f"{css.relative_to(site)}: {what}" for what in _css_fetches(css.read_text())]
    assert found == []


def test_the_offline_check_sees_what_material_would_fetch_with_its_fonts_on() -> None:
    """The check above can fail: Material's own head with `theme.font` set, and a CDN script."""
    reader = _Fetches()
    reader.feed(
        '<link rel="preconnect" href="https://fonts.gstatic.com" crossorigin>'
        '<link rel="stylesheet" href="https://fonts.googleapis.com/css?family=Roboto">'
        '<script src="//cdn.jsdelivr.net/npm/x.js"></script>'
        "<style>@font-face{src:url(https://unpkg.com/f.woff2)}</style>"
        '<a href="https://example.org/">a link to click is not fetched</a>'
        '<img src="data:image/png;base64,AA==">'
    )
    assert len(reader.remote) == 4


def _subcommands(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield sub
                yield from _subcommands(sub)


def test_the_cli_page_has_every_subcommand_with_every_option(site: Path) -> None:
    page = (site / "reference" / "cli" / "index.html").read_text(encoding="utf-8")
    parser = _parser()
    subs = list(_subcommands(parser))
    assert len(subs) > 15
    for sub in [parser, *subs]:
        assert f'id="{sub.prog.replace(" ", "-")}"' in page or sub is parser, sub.prog
        for action in sub._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            for flag in action.option_strings:
                if flag.startswith("--"):
                    assert f"<code>{flag}" in page, (sub.prog, flag)


def _hook(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "docs" / "hooks" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_http_page_has_every_operation_and_schema_of_the_openapi_document(
    site: Path,
) -> None:
    hook = _hook("http_reference")
    document = hook.openapi_document()
    page = (site / "reference" / "http-api" / "index.html").read_text(encoding="utf-8")
    operations = [(method, path) for path, ops in document["paths"].items() for method in ops]
    assert ("post", "/v1/runs") in operations and len(operations) > 10
    for method, path in operations:
        assert f'id="{hook._op_anchor(method, path)}"' in page, (method, path)
    for name in document["components"]["schemas"]:
        assert f'id="schema-{name.lower()}"' in page, name


def test_the_python_api_page_documents_exactly_what_runner_exports(site: Path) -> None:
    documented = re.findall(r"^::: runner\.(\w+)$", API_PAGE.read_text(), re.MULTILINE)
    assert sorted(documented) == sorted(runner.__all__)
    assert len(documented) == len(set(documented))
    page = (site / "reference" / "python-api" / "index.html").read_text(encoding="utf-8")
    for name in runner.__all__:
        assert f'id="runner.{name}"' in page, name


def test_the_exceptions_page_shows_every_class_of_the_tree(site: Path) -> None:
    page = (site / "reference" / "exceptions" / "index.html").read_text(encoding="utf-8")
    assert "RunnerError" in page and "&lt;!-- exception-tree --&gt;" not in page
    for name, value in vars(errors).items():
        if isinstance(value, type) and issubclass(value, errors.RunnerError):
            assert f"<code>{name}</code>" in page, name


REFERENCE = ROOT / "docs" / "reference"


def _named(page: str) -> set[str]:
    """Every name the page writes as code (`name`), and each word inside code (`{a, b}`)."""
    text = (REFERENCE / page).read_text(encoding="utf-8")
    text = re.sub(r"^```.*?^```$", "", text, flags=re.MULTILINE | re.DOTALL)  # shown, not named
    found: set[str] = set()
    for code in re.findall(r"`([^`]+)`", text):
        found.add(code)
        found.update(re.findall(r"[A-Za-z_][\w-]*", code))
    return found


def _missing(names: Iterable[str], page: str) -> list[str]:
    return sorted(set(names) - _named(page))


def test_the_json_page_names_every_key_class_state_and_trigger(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Keys from a real `run --json` and `show --json`, not from a list kept beside the page."""
    fixture = str(ROOT / "fixtures" / "hold_not_committed.yaml")
    db = str(tmp_path / "runs.sqlite")
    assert main(["run", fixture, "--json", "--db", db]) == 0
    run = json.loads(capsys.readouterr().out)
    assert main(["show", run["run_id"], "--json", "--db", db]) == 0
    shown = json.loads(capsys.readouterr().out)
    keys = {*run, *run["tokens"], *run["context"], *shown, *shown["context"]}
    keys |= {key for transition in run["transitions"] for key in transition}
    keys |= {key for op in run["operation_keys"] for key in op}
    keys |= set(shown["started_as"])
    assert _missing(keys, "json-output.md") == []
    words = [*get_args(ResultClass), *(t.value for t in Trigger), *(s.value for s in State)]
    assert _missing(words, "json-output.md") == []


def _fields(*models: type[BaseModel]) -> set[str]:
    return {name for model in models for name in model.model_fields}


def test_the_format_pages_name_every_field_of_their_models() -> None:
    assert (
        _missing(
            _fields(
                Fixture, Expect, ToolOutcome, ScriptedTurn, ApprovalScript, ChildScript, Limits
            ),
            "fixture-format.md",
        )
        == []
    )
    assert _missing(_fields(Contract), "contract-format.md") == []
    assert _missing(RESERVED_ARGUMENTS, "contract-format.md") == []
    assert _missing(_fields(Policy, Backoff, ApprovalRules), "policy-format.md") == []
    # a ceiling bounds the five budgets; `final_within_caps` is what a child run's limits set
    service = _fields(ServiceConfig, ApiKey, PrincipalConfig, LiveConfig, ProviderConfig, Limits)
    assert _missing(service - {"final_within_caps"}, "service-config.md") == []
    header = {f.name for f in dataclasses.fields(RunHeader)}
    summary = {f.name for f in dataclasses.fields(RunSummary)}
    turn = {f.name for f in dataclasses.fields(RecordedTurn)} - {"model_state", "run_id"}
    output = {f.name for f in dataclasses.fields(RecordedOutput)} - {"run_id"}
    assert _missing(header | summary | turn | output, "log-format.md") == []
