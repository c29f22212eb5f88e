"""The run inspector page in a real headless Chromium (the system's, driven by Selenium through
/usr/bin/chromedriver, offline): submit a run and watch its timeline fill in live, approve a
pending hold from the page and see its continuation complete. Screenshots are saved under
`$RUNNER_TEST_ARTIFACTS` (default: the system temp folder's `runner-service-screenshots`)."""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service as DriverService
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait

from tests.support.service_harness import LONG, A, Service, loopback, serving

__all__ = ["loopback"]

pytestmark = [pytest.mark.browser, pytest.mark.usefixtures("loopback")]

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
T = TypeVar("T")


@pytest.fixture(scope="module")
def artifacts() -> Path:
    folder = Path(
        os.environ.get("RUNNER_TEST_ARTIFACTS")
        or Path(tempfile.gettempdir()) / "runner-service-screenshots"
    )
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    with serving(tmp_path_factory.mktemp("page"), pace_s=0.15) as running:
        yield running


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[WebDriver]:
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not Path(p).exists()]
    assert not missing, f"install chromium and chromium-driver (.ci/run does): {missing}"
    options = Options()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                 "--window-size=1280,1400", f"--user-data-dir={tmp_path / 'profile'}"):  # fmt: skip
        options.add_argument(flag)
    driver = webdriver.Chrome(service=DriverService(executable_path=CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(tmp_path / "profile", ignore_errors=True)


def _until(driver: WebDriver, check: Callable[[WebDriver], T], timeout: float = 60) -> T:
    return WebDriverWait(driver, timeout, poll_frequency=0.05).until(check)


def _text(driver: WebDriver, ident: str) -> str:
    return str(driver.find_element(By.ID, ident).text)


def _rows(driver: WebDriver) -> int:
    return len(driver.find_elements(By.CSS_SELECTOR, "#timeline-body tr.transition"))


def _open(driver: WebDriver, service: Service) -> None:
    driver.get(service.url + "/")
    driver.find_element(By.ID, "key").send_keys(A)
    driver.find_element(By.ID, "save-key").click()
    _until(driver, lambda d: _text(d, "status") == "ready")


def _submit(driver: WebDriver, fixture: str) -> None:
    box = driver.find_element(By.ID, "fixture")
    box.clear()
    box.send_keys(fixture)
    driver.find_element(By.ID, "submit").click()
    _until(
        driver, lambda d: _text(d, "run-id") != "" and d.current_url.endswith(_text(d, "run-id"))
    )


def test_a_submitted_run_fills_its_timeline_live_and_its_diagram_shows_its_edges(
    service: Service, browser: WebDriver, artifacts: Path
) -> None:
    _open(browser, service)
    _submit(browser, LONG)
    # Filling in while it goes: some rows, not yet the end, then more rows.
    _until(browser, lambda d: _rows(d) >= 3)
    seen_midway, ended_midway = _rows(browser), _text(browser, "run-ended")
    cancel = browser.find_element(By.ID, "cancel")
    shown_midway = cancel.is_displayed()
    browser.save_screenshot(str(artifacts / "run-midway.png"))
    _until(browser, lambda d: _text(d, "run-ended").startswith("ended"))
    browser.save_screenshot(str(artifacts / "run-ended.png"))
    assert ended_midway == ""
    assert shown_midway and not cancel.is_displayed()  # no cancel for a run that ended
    assert _rows(browser) > seen_midway
    assert _text(browser, "run-ended") == "ended complete (model_final)"
    assert _text(browser, "run-state") == "complete"
    run_id = _text(browser, "run-id")
    with service.client() as client:
        stored = client.get(f"/v1/runs/{run_id}/transitions", params={"limit": 1000}).json()
    assert _rows(browser) == len(stored["transitions"])  # every transition, each once
    cells = [
        c.text for c in browser.find_elements(By.CSS_SELECTOR, "#timeline-body tr:first-child td")
    ]
    first = stored["transitions"][0]
    assert cells[:3] == [str(first["seq"]), f"{first['from']} → {first['to']}", first["trigger"]]
    taken = {e.get_attribute("id") for e in browser.find_elements(By.CSS_SELECTOR, ".edge.taken")}
    assert taken == {f"edge-{t['from']}-{t['to']}" for t in stored["transitions"]}
    assert "edge-plan-abstain" not in taken and "edge-plan-call" in taken
    assert len(browser.find_elements(By.CSS_SELECTOR, "#machine .state")) == 7
    current = browser.find_element(By.CSS_SELECTOR, ".state.current").get_attribute("id")
    assert current == "state-complete"
    _until(browser, lambda d: "complete" in d.find_element(By.CSS_SELECTOR, "#runs-body tr").text)
    newest = browser.find_element(By.CSS_SELECTOR, "#runs-body tr")  # newest first
    assert newest.get_attribute("data-run-id") == run_id
    assert LONG in newest.text and "model_final" in newest.text


def test_a_pending_hold_is_approved_from_the_page_and_its_run_completes(
    service: Service, browser: WebDriver, artifacts: Path
) -> None:
    _open(browser, service)
    _submit(browser, "hold_approved")
    waiting = _text(browser, "run-id")
    _until(browser, lambda d: _text(d, "run-ended") == "ended escalate (approval_required)")
    selector = f'#approvals-list .pending[data-approval-id^="{waiting}~"]'
    pending = _until(browser, lambda d: d.find_elements(By.CSS_SELECTOR, selector))
    assert "hold_room" in pending[0].text or "H-SHIBA" in pending[0].text
    time.sleep(2.5)  # two polls of the approvals: the same buttons, not rebuilt under a click
    assert browser.find_elements(By.CSS_SELECTOR, selector)[0] == pending[0]
    browser.save_screenshot(str(artifacts / "approval-pending.png"))
    pending[0].find_element(By.CSS_SELECTOR, "button.approve-btn").click()
    _until(browser, lambda d: _text(d, "run-id") not in ("", waiting))  # its continuation
    _until(browser, lambda d: _text(d, "run-ended").startswith("ended"))
    browser.save_screenshot(str(artifacts / "approval-continued.png"))
    assert _text(browser, "run-ended") == "ended complete (model_final)"
    assert "approved by agent-7" in _text(browser, "status")
    _until(browser, lambda d: not d.find_elements(By.CSS_SELECTOR, selector))
    continued = service.wait_ended(_text(browser, "run-id"))
    assert (continued["continues"], continued["holds"]) == (waiting, 1)
    assert all((artifacts / name).stat().st_size > 0 for name in ("approval-pending.png",))


def test_a_waiting_run_s_view_says_where_its_continuation_stands(
    service: Service, browser: WebDriver
) -> None:
    """Decided outside the page (another approver, the API): the view of the waiting run
    follows its continuation on its poll, from waiting to ended, linking to it; a run that
    waits for nothing shows no such line."""
    _open(browser, service)
    _submit(browser, "hold_approved")
    waiting = _text(browser, "run-id")
    line = "continuation: waiting for 1 decision"
    _until(browser, lambda d: _text(d, "run-continuation") == line)
    (pending,) = service.pending(waiting)
    with service.client() as client:
        assert client.post(f"/v1/approvals/{pending['approval_id']}/approve").status_code == 200
    box = browser.find_element(By.ID, "run-continuation")
    _until(browser, lambda d: box.get_attribute("data-state") == "ended")
    continued = service.wait_ended(waiting)["continued_as"]
    assert _text(browser, "run-continuation") == f"continuation: ended as {continued[:8]}"
    link = box.find_element(By.TAG_NAME, "a").get_attribute("href")
    assert link is not None and link.endswith(f"#run/{continued}")
    _submit(browser, "read_only_success")
    _until(browser, lambda d: _text(d, "run-ended").startswith("ended"))
    assert not box.is_displayed()


_RECORD_POSTS = """
window.sentPosts = [];
const original = window.fetch;
window.fetch = (path, options) => {
  const sent = new URL(path, location.href).pathname;  // as the browser resolves it (`..`)
  if (options && options.method === "POST") window.sentPosts.push(sent);
  return original(path, options);
};
"""


def _posts(driver: WebDriver) -> list[str]:
    sent: list[str] = driver.execute_script("return window.sentPosts")
    return sent


@pytest.mark.parametrize(
    "crafted",
    [
        "#run/../approvals/{approval}/approve?",
        "#run/../approvals/{approval}/deny?",
        "#run/..%2Fapprovals%2F{approval}%2Fapprove%3F",
        "#run/..",
        "#run/.",
    ],
)
def test_a_crafted_link_shows_no_such_run_and_its_cancel_sends_nothing(
    service: Service, browser: WebDriver, crafted: str
) -> None:
    """The run id in the page's address is checked before it goes into any request: a link whose
    "run" walks up the path (`..`) to an approval cannot make the cancel button approve it."""
    waiting = service.submit("hold_approved")
    assert service.wait_ended(waiting)["reason"] == "approval_required"
    approval = service.pending(waiting)[0]["approval_id"]
    _open(browser, service)
    browser.execute_script(_RECORD_POSTS)
    browser.get(service.url + "/" + crafted.format(approval=approval))
    _until(browser, lambda d: _text(d, "run-state") == "no such run")
    assert not browser.find_element(By.ID, "cancel").is_displayed()
    browser.execute_script('document.getElementById("cancel").click()')  # even when forced
    time.sleep(1.5)
    assert _posts(browser) == []
    assert [p["approval_id"] for p in service.pending(waiting)] == [approval]
    assert _text(browser, "run-id") == ""


def test_an_unknown_run_id_in_the_link_shows_no_such_run(
    service: Service, browser: WebDriver
) -> None:
    _open(browser, service)
    browser.get(service.url + "/#run/0f3a1e52-0000-4000-8000-000000000000")
    _until(browser, lambda d: _text(d, "run-state") == "no such run")
    assert not browser.find_element(By.ID, "cancel").is_displayed()


def test_cancel_from_a_run_view_cancels_that_run(service: Service, browser: WebDriver) -> None:
    _open(browser, service)
    browser.execute_script(_RECORD_POSTS)
    _submit(browser, LONG)
    run_id = _text(browser, "run-id")
    _until(browser, lambda d: _rows(d) >= 2)
    browser.find_element(By.ID, "cancel").click()
    _until(browser, lambda d: _text(d, "run-ended") == "ended abstain (cancelled)")
    assert _posts(browser) == ["/v1/runs", f"/v1/runs/{run_id}/cancel"]
    assert service.wait_ended(run_id)["reason"] == "cancelled"


def test_the_page_says_so_when_the_service_stops_answering(
    tmp_path: Path, browser: WebDriver
) -> None:
    """The page polls the runs and approvals every second; once the service is gone, its status
    says the service is unreachable instead of still showing `ready` over a stale list."""
    with serving(tmp_path / "stopping") as running:
        _open(browser, running)
    status = _until(
        browser, lambda d: _text(d, "status").startswith("unreachable") and _text(d, "status")
    )
    assert "fetch" in status.lower(), status


def test_a_service_that_hangs_is_unreachable_too_and_ready_once_it_answers(
    tmp_path: Path, browser: WebDriver
) -> None:
    """A stopped process (SIGSTOP) accepts connections and never answers: the poll gives up
    after 10 s and says so, and the page is ready again once the service answers."""
    with serving(tmp_path / "hanging") as running:
        _open(browser, running)
        running.process.send_signal(signal.SIGSTOP)
        try:
            status = _until(browser, lambda d: _text(d, "status").startswith("unreachable"))
            assert _text(browser, "status") == "unreachable: no answer in 10 s", status
        finally:
            running.process.send_signal(signal.SIGCONT)
        _until(browser, lambda d: _text(d, "status") == "ready")
