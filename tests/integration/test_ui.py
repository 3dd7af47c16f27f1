"""The web page at /ui/ in a real headless Chromium (Selenium), against a live server.

One server and one browser serve the whole module. Chromium and its driver are Debian's
`chromium` and `chromium-driver`; without them these tests are skipped on a developer
machine but fail in CI (`CI=true` or `MEMSYNC_REQUIRE_BROWSER=1`), like PostgreSQL's.
With `MEMSYNC_UI_SCREENSHOTS=1` the walk-through saves the user guide's screenshots
into docs/ui/.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from selenium import webdriver
from selenium.common.exceptions import NoSuchElementException, WebDriverException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.wait import WebDriverWait

from sync_server.config import Settings, sqlite_url
from tests.liveserver import LiveServer, run_live_server

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
REPO = "acme/app"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
HOSTILE_KEY = "x<script>document.title='pwned'</script>.md"
HOSTILE_TEXT = (
    "---\nname: <b>bold</b> <script>document.title='pwned'</script>\n"
    "description: '<img src=x onerror=\"document.title=1\">'\n---\n"
    "# Hostile <script>document.title='pwned'</script>\n\n"
    "<img src=x onerror=\"document.title='pwned'\">\n\n"
    "[click me](javascript:document.title='pwned') "
    "[me too](JaVaScRiPt:alert(1)) "
    "<a href=\"javascript:document.title='pwned'\">raw link</a>\n\n"
    "![pic](javascript:alert(1)) ![logo](https://example.invalid/logo.png)\n"
)


def _browser_required() -> bool:
    return os.environ.get("CI", "").lower() == "true" or bool(
        os.environ.get("MEMSYNC_REQUIRE_BROWSER")
    )


def _start_browser(*, javascript: bool = True) -> WebDriver:
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--window-size=1200,900",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
    ):
        options.add_argument(argument)
    if not javascript:
        options.add_experimental_option(
            "prefs", {"profile.managed_default_content_settings.javascript": 2}
        )
    try:
        return webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
    except Exception as error:
        if _browser_required():
            pytest.fail(f"a headless Chromium is required here but did not start: {error}")
        pytest.skip(f"no headless Chromium ({error}); apt-get install chromium chromium-driver")


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """One server for the module, with a repo of notes written by alice and bob."""
    database = sqlite_url(tmp_path_factory.mktemp("ui") / "memsync.sqlite3")
    with run_live_server(Settings(database_url=database)) as server:
        alice = server.token(REPO, name="alice")
        bob = server.token("acme/*", name="bob")
        with server.client(alice) as api:
            first = {
                "MEMORY.md": "# Team memory\n- [Database](decisions/db.md) — which database\n"
                "- [Gone](gone.md) — a note nobody wrote\n",
                "decisions/db.md": "---\nname: Database\ndescription: which database we use\n"
                "---\n\nUse **PostgreSQL** 15.\n",
                "style.md": "---\nname: Style\ndescription: code style\n---\n\nTabs.\n",
            }
            assert api.put(f"/v1/team_memory?repo={REPO}", json={"entries": first}).is_success
        with server.client(bob) as api:
            second = {
                "decisions/db.md": "---\nname: Database\ndescription: which database we use\n"
                "---\n\nUse **PostgreSQL** 16, never MySQL.\n",
                HOSTILE_KEY: HOSTILE_TEXT,
            }
            assert api.put(f"/v1/team_memory?repo={REPO}", json={"entries": second}).is_success
            other = {"secret.md": "---\nname: Other\ndescription: elsewhere\n---\n\nHidden.\n"}
            assert api.put("/v1/team_memory?repo=acme/other", json={"entries": other}).is_success
        yield server


@pytest.fixture(scope="module")
def browser() -> Iterator[WebDriver]:
    """One headless Chromium for the module."""
    driver = _start_browser()
    try:
        yield driver
    finally:
        driver.quit()


def sign_in(browser: WebDriver, live: LiveServer, token: str) -> None:
    browser.delete_all_cookies()
    browser.get(f"{live.base_url}/ui/")
    browser.find_element(By.ID, "token").send_keys(token)
    follow(browser, browser.find_element(By.ID, "sign-in"))
    assert browser.find_elements(By.ID, "sign-out"), browser.page_source[:2000]


def follow(browser: WebDriver, element: WebElement) -> None:
    """Click a link or button and wait for the next page."""
    page = browser.find_element(By.TAG_NAME, "html")
    element.click()

    def left(_: WebDriver) -> bool:
        try:
            page.is_enabled()  # fails once the old page is gone (stale, or detached)
        except WebDriverException:
            return bool(browser.execute_script("return document.readyState") == "complete")
        return False

    WebDriverWait(browser, 10).until(left)


def texts(browser: WebDriver, selector: str) -> list[str]:
    return [element.text for element in browser.find_elements(By.CSS_SELECTOR, selector)]


def note_url(live: LiveServer, key: str, **query: str) -> str:
    params = httpx.QueryParams({"key": key, **query})
    return f"{live.base_url}/ui/repo/{REPO}/note?{params}"


def session_client(live: LiveServer, browser: WebDriver) -> httpx.Client:
    """httpx with the browser's session cookie (for requests a page would not make)."""
    cookie = browser.get_cookie("memsync_ui")
    assert cookie is not None
    return httpx.Client(base_url=live.base_url, cookies={"memsync_ui": cookie["value"]}, timeout=30)


def csrf_of(browser: WebDriver) -> str:
    field = browser.find_element(By.CSS_SELECTOR, "input[name=csrf]")
    value = field.get_attribute("value")
    assert value
    return value


def screenshot(browser: WebDriver, name: str, tmp_path: Path) -> None:
    folder = ROOT / "docs" / "ui" if os.environ.get("MEMSYNC_UI_SCREENSHOTS") else tmp_path
    folder.mkdir(parents=True, exist_ok=True)
    height = browser.execute_script("return document.body.scrollHeight")
    browser.set_window_size(1100, min(max(int(height), 600), 1400))
    assert browser.save_screenshot(str(folder / f"{name}.png"))
    browser.set_window_size(1200, 900)


def test_sign_in_browse_search_diff_restore_delete_and_sign_out(
    live: LiveServer, browser: WebDriver, tmp_path: Path
) -> None:
    browser.delete_all_cookies()
    browser.get(f"{live.base_url}/ui/")
    assert browser.find_elements(By.ID, "token")
    sign_in(browser, live, live.token("acme/*", name="carol"))
    assert browser.find_element(By.ID, "who").text == "carol"
    cookie = browser.get_cookie("memsync_ui")
    assert cookie is not None
    assert cookie["httpOnly"]
    assert cookie["sameSite"] == "Strict"
    assert "mst_" not in cookie["value"]
    assert "mst_" not in browser.current_url
    assert texts(browser, "#repos td:first-child") == ["acme/app", "acme/other"]

    follow(browser, browser.find_element(By.LINK_TEXT, REPO))
    health = browser.find_element(By.ID, "health").text
    assert "dangling: MEMORY.md line 3 links to gone.md" in health
    assert f"orphan: no line of MEMORY.md links to {HOSTILE_KEY}" in health
    assert "style.md" in health
    index = browser.find_element(By.ID, "index")
    assert index.find_element(By.LINK_TEXT, "Database").get_attribute("href") == note_url(
        live, "decisions/db.md"
    )
    assert set(texts(browser, "#recent .author")) == {"alice", "bob"}
    screenshot(browser, "repo", tmp_path)

    browser.find_element(By.ID, "q").send_keys("mysql")
    follow(browser, browser.find_element(By.ID, "search"))
    assert texts(browser, ".hit > a") == ["decisions/db.md"]
    browser.find_element(By.ID, "q").clear()
    browser.find_element(By.ID, "q").send_keys("code style")
    follow(browser, browser.find_element(By.ID, "search"))
    assert texts(browser, ".hit > a") == ["style.md"]  # by its description

    browser.get(note_url(live, "decisions/db.md"))
    assert "Last changed by bob" in browser.find_element(By.ID, "last-change").text
    rendered = browser.find_element(By.CSS_SELECTOR, "#rendered strong")
    assert rendered.text == "PostgreSQL"
    assert "Use **PostgreSQL** 16" in browser.find_element(By.CSS_SELECTOR, "pre.raw").text
    assert texts(browser, ".version .author") == ["bob", "alice"]
    follow(browser, browser.find_element(By.ID, "compare"))  # newest against the one before
    assert texts(browser, "pre.diff .del") == ["-Use **PostgreSQL** 15."]
    assert texts(browser, "pre.diff .add") == ["+Use **PostgreSQL** 16, never MySQL."]
    screenshot(browser, "note", tmp_path)

    # Restore alice's version: a new version by carol, which every client's pull sees.
    first = texts(browser, ".version td:nth-child(3)")[-1]
    follow(browser, browser.find_element(By.CSS_SELECTOR, f"#v{first} button.restore"))
    assert "Last changed by carol" in browser.find_element(By.ID, "last-change").text
    with live.client(live.token(REPO, read_only=True)) as api:
        answer = api.get(f"/v1/team_memory?repo={REPO}&key=decisions/db.md").json()
    assert "PostgreSQL** 15." in answer["content"]

    # Delete, through the confirmation page.
    follow(browser, browser.find_element(By.ID, "delete"))
    assert "for the whole team" in browser.find_element(By.TAG_NAME, "h1").text
    follow(browser, browser.find_element(By.ID, "cancel"))
    assert browser.find_elements(By.ID, "delete")
    follow(browser, browser.find_element(By.ID, "delete"))
    follow(browser, browser.find_element(By.ID, "confirm-delete"))
    row = browser.find_element(By.CSS_SELECTOR, ".deleted-note")
    assert "decisions/db.md" in row.text
    assert "carol" in row.text
    with live.client(live.token(REPO, read_only=True)) as api:
        assert api.get(f"/v1/team_memory?repo={REPO}&key=decisions/db.md").status_code == 404
    # ... and back, from the deleted notes.
    follow(browser, row.find_element(By.CSS_SELECTOR, "button.restore"))
    assert "Last changed by carol" in browser.find_element(By.ID, "last-change").text
    browser.get(f"{live.base_url}/ui/repo/{REPO}/activity?author=carol")
    assert texts(browser, ".commit td:nth-child(4)")[:3] == ["restore 1", "delete 1", "restore 1"]

    follow(browser, browser.find_element(By.ID, "sign-out"))
    assert browser.find_elements(By.ID, "token")
    assert browser.get_cookie("memsync_ui") is None
    browser.get(f"{live.base_url}/ui/repo/{REPO}")
    assert browser.find_elements(By.ID, "token")  # signed out: the sign-in form


def test_a_read_only_token_sees_no_write_buttons_and_its_writes_are_refused(
    live: LiveServer, browser: WebDriver
) -> None:
    sign_in(browser, live, live.token(REPO, read_only=True, name="reader"))
    assert browser.find_element(By.ID, "read-only").text == "read-only"
    browser.get(note_url(live, "style.md"))
    assert "Tabs." in browser.find_element(By.ID, "rendered").text
    assert not browser.find_elements(By.ID, "delete")
    assert not browser.find_elements(By.CSS_SELECTOR, "button.restore")
    csrf = csrf_of(browser)
    with session_client(live, browser) as client:
        refused = client.post(
            f"/ui/repo/{REPO}/delete", data={"key": "style.md", "confirm": "yes", "csrf": csrf}
        )
        assert refused.status_code == 403
        assert "read-only" in refused.text
        assert client.get(f"/ui/repo/{REPO}/delete", params={"key": "style.md"}).status_code == 403
    assert live.store.snapshot(REPO, with_texts=False, key="style.md") is not None


def test_a_token_of_another_repo_sees_nothing_of_this_one(
    live: LiveServer, browser: WebDriver
) -> None:
    sign_in(browser, live, live.token("acme/other", name="outsider"))
    assert texts(browser, "#repos td:first-child") == ["acme/other"]
    for path in ("", "/activity", "/deleted", "/search?q=postgres"):
        browser.get(f"{live.base_url}/ui/repo/{REPO}{path}")
        assert browser.find_element(By.ID, "message").text == "No such repo."
        assert "PostgreSQL" not in browser.page_source
    browser.get(note_url(live, "decisions/db.md"))
    assert "PostgreSQL" not in browser.page_source
    with session_client(live, browser) as client:
        assert client.get(f"/ui/repo/{REPO}").status_code == 404
        assert client.get(f"/ui/repo/{REPO}/note", params={"key": "style.md"}).status_code == 404


def test_a_hostile_note_renders_inert(live: LiveServer, browser: WebDriver) -> None:
    sign_in(browser, live, live.token(REPO, read_only=True, name="careful"))
    for url in (
        f"{live.base_url}/ui/repo/{REPO}",
        note_url(live, HOSTILE_KEY),
        f"{live.base_url}/ui/repo/{REPO}/search?q=hostile",
        f"{live.base_url}/ui/repo/{REPO}/activity",
    ):
        browser.get(url)
        title = browser.title
        assert title.endswith("memsync"), url
        assert title not in ("pwned", "1"), url  # a script would have set it
        assert browser.execute_script("return document.scripts.length") == 0, url
        assert browser.execute_script("return document.images.length") == 0, url
        hrefs = browser.execute_script(
            "return Array.from(document.querySelectorAll('[href],[src],[onerror]'))"
            ".map(e => e.getAttribute('href') || e.getAttribute('src') || 'onerror')"
        )
        assert not [h for h in hrefs if h == "onerror" or re.match(r"\s*javascript:", h, re.I)]
    # The key and the text show as text, on the note's page.
    browser.get(note_url(live, HOSTILE_KEY))
    assert browser.find_element(By.ID, "note-key").text == HOSTILE_KEY
    assert browser.title == f"{HOSTILE_KEY} · {REPO} · memsync"
    rendered = browser.find_element(By.ID, "rendered")
    assert "<script>document.title='pwned'</script>" in rendered.text
    assert rendered.find_element(By.LINK_TEXT, "image: logo").get_attribute("href") == (
        "https://example.invalid/logo.png"
    )
    with pytest.raises(NoSuchElementException):
        rendered.find_element(By.LINK_TEXT, "click me")
    answer = httpx.get(note_url(live, HOSTILE_KEY), cookies=_cookie(browser))
    policy = answer.headers["content-security-policy"]
    assert policy.startswith("default-src 'none'; style-src 'self'")
    assert "frame-ancestors 'none'" in policy
    assert answer.headers["x-content-type-options"] == "nosniff"
    assert answer.headers["referrer-policy"] == "same-origin"


def _cookie(browser: WebDriver) -> dict[str, str]:
    cookie = browser.get_cookie("memsync_ui")
    assert cookie is not None
    return {"memsync_ui": cookie["value"]}


def test_a_write_without_the_csrf_token_or_from_another_origin_is_refused(
    live: LiveServer, browser: WebDriver, caplog: pytest.LogCaptureFixture
) -> None:
    sign_in(browser, live, live.token(REPO, name="dave"))
    browser.get(note_url(live, "style.md"))
    csrf = csrf_of(browser)
    form = {"key": "style.md", "confirm": "yes"}
    with session_client(live, browser) as client:
        with caplog.at_level(logging.INFO, logger="memsync.access"):
            assert client.post(f"/ui/repo/{REPO}/delete", data=form).status_code == 403
            client.get("/healthz")  # the record is written after the answer: order it
        # The access log names the page's repo, the client and the token's name.
        line = next(
            r.getMessage() for r in caplog.records if r.getMessage().startswith("POST /ui/")
        )
        assert line.endswith(f"403 {line.split()[3]} repo={REPO} client=127.0.0.1 by=dave")
        wrong = client.post(f"/ui/repo/{REPO}/delete", data={**form, "csrf": "x" * 43})
        assert wrong.status_code == 403
        foreign = client.post(
            f"/ui/repo/{REPO}/delete",
            data={**form, "csrf": csrf},
            headers={"Origin": "https://evil.example"},
        )
        assert foreign.status_code == 403
        cross = client.post(
            f"/ui/repo/{REPO}/delete",
            data={**form, "csrf": csrf},
            headers={"Sec-Fetch-Site": "cross-site"},
        )
        assert cross.status_code == 403
    assert live.store.snapshot(REPO, with_texts=False, key="style.md") is not None
    # A forged cookie is no session at all.
    forged = httpx.get(f"{live.base_url}/ui/repo/{REPO}", cookies={"memsync_ui": "x.y.z"})
    assert forged.status_code == 401
    assert 'id="token"' in forged.text


def test_a_revoked_token_ends_its_session_at_once(live: LiveServer, browser: WebDriver) -> None:
    sign_in(browser, live, live.token(REPO, name="eve"))
    browser.get(f"{live.base_url}/ui/repo/{REPO}")
    assert browser.find_elements(By.ID, "health")
    assert live.store.revoke_token("eve") == 1
    browser.get(f"{live.base_url}/ui/repo/{REPO}")
    assert not browser.find_elements(By.ID, "health")
    assert browser.find_elements(By.ID, "token")
    browser.get(f"{live.base_url}/ui/")
    browser.find_element(By.ID, "token").send_keys("mst_" + "a" * 42)
    follow(browser, browser.find_element(By.ID, "sign-in"))
    assert "unknown" in browser.find_element(By.ID, "message").text


def test_reading_works_with_javascript_off(live: LiveServer) -> None:
    plain = _start_browser(javascript=False)
    try:
        sign_in(plain, live, live.token(REPO, name="frank"))
        assert plain.execute_script("return 1") == 1  # the driver's own scripts still run
        plain.get(f"{live.base_url}/ui/repo/{REPO}")
        follow(plain, plain.find_element(By.LINK_TEXT, "style.md"))
        assert "Tabs." in plain.find_element(By.ID, "rendered").text
        follow(plain, plain.find_element(By.ID, "compare"))
        assert plain.find_elements(By.ID, "diff")
        plain.find_element(By.ID, "q").send_keys("database")
        follow(plain, plain.find_element(By.ID, "search"))
        assert "decisions/db.md" in texts(plain, ".hit > a")
        follow(plain, plain.find_element(By.ID, "sign-out"))
        assert plain.find_elements(By.ID, "token")
    finally:
        plain.quit()
