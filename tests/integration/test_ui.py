"""The web page at /ui/ in a real headless Chromium (Selenium), against a live server.

One server and one browser serve the whole module; what needs no browser (a page's
HTML, a write's outcome, the server's address) is read over plain HTTP, which is cheaper.
Chromium and its driver are Debian's `chromium` and `chromium-driver`; without them the
browser tests are skipped on a developer machine but fail in CI (`CI=true` or
`MEMSYNC_REQUIRE_BROWSER=1`), like PostgreSQL's.
With `MEMSYNC_UI_SCREENSHOTS=1` the walk-through saves the user guide's screenshots
into docs/ui/.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
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

from sync_server.auth import issue_token
from sync_server.config import Settings, sqlite_url
from sync_server.ui import review
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
                "style.md": "---\nname: Style\ndescription: code style\n---\n\n"
                "Tabs. Run `make build`.\n",
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
    notice = browser.find_element(By.ID, "notice").text
    assert notice.startswith("Deleted decisions/db.md for the team (version ")
    assert "Its MEMORY.md line 2 went in the same commit." in notice
    row = browser.find_element(By.CSS_SELECTOR, ".deleted-note")
    assert "decisions/db.md" in row.text
    assert "carol" in row.text
    with live.client(live.token(REPO, read_only=True)) as api:
        assert api.get(f"/v1/team_memory?repo={REPO}&key=decisions/db.md").status_code == 404
    # ... and back, from the deleted notes.
    follow(browser, row.find_element(By.CSS_SELECTOR, "button.restore"))
    assert "Last changed by carol" in browser.find_element(By.ID, "last-change").text
    assert "Its line in MEMORY.md is back too" in browser.find_element(By.ID, "notice").text
    browser.get(f"{live.base_url}/ui/repo/{REPO}/activity?author=carol")
    assert texts(browser, ".commit td:nth-child(4)")[:4] == [
        "put 1",  # the index line, back
        "restore 1",
        "put 1, delete 1",  # the note and its index line, in one commit
        "restore 1",
    ]
    assert not browser.find_elements(By.ID, "notice")  # said once

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
    code = browser.find_element(By.CSS_SELECTOR, "#rendered code")
    assert code.text == "make build"
    assert "monospace" in code.value_of_css_property("font-family")
    assert code.value_of_css_property("background-color") != "rgba(0, 0, 0, 0)"
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


# -- plain HTTP: the page's HTML, without a browser ---------------------------------------


@contextmanager
def http_session(live: LiveServer, token: str) -> Iterator[httpx.Client]:
    """httpx signed in through the sign-in form, as a browser would be."""
    with httpx.Client(base_url=live.base_url, timeout=30) as client:
        answer = client.post("/ui/signin", data={"token": token})
        assert answer.status_code == 303, answer.text[:500]
        yield client


def csrf_in(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    assert found is not None
    return found.group(1)


def notice_in(html: str) -> str | None:
    found = re.search(r'<p class="notice" id="notice" role="status">([^<]*)</p>', html)
    return None if found is None else found.group(1)


def put_entries(live: LiveServer, token: str, repo: str, entries: dict[str, str]) -> None:
    with live.client(token) as api:
        assert api.put(f"/v1/team_memory?repo={repo}", json={"entries": entries}).is_success


def test_deleting_on_the_page_drops_the_index_line_in_the_same_commit_and_restoring_brings_it_back(
    live: LiveServer,
) -> None:
    repo = "acme/undo"
    writer = live.token(repo, name="gina")
    index = "# Team\n- [A](a.md) — first\n- [B](b.md) — second\n"
    note = "---\nname: {0}\ndescription: the {0} note\n---\n\nText.\n"
    put_entries(
        live,
        writer,
        repo,
        {
            "MEMORY.md": index,
            "a.md": note.format("A"),
            "b.md": note.format("B"),
            "c.md": note.format("C"),
        },
    )
    with http_session(live, writer) as client:
        page = f"/ui/repo/{repo}"
        csrf = csrf_in(client.get(f"{page}/note", params={"key": "a.md"}).text)
        deleted = client.post(
            f"{page}/delete", data={"key": "a.md", "confirm": "yes", "csrf": csrf}
        )
        assert deleted.status_code == 303
        assert deleted.headers["location"] == f"{page}/deleted"  # nothing but the page
        landed = client.get(deleted.headers["location"]).text
        assert notice_in(landed) == (
            "Deleted a.md for the team (version 2). Its MEMORY.md line 2 went in the same "
            "commit. Restore it below to undo."
        )
        assert notice_in(client.get(f"{page}/deleted").text) is None  # said once
        commit = live.store.log(repo, limit=1).commits[0]
        assert (commit.version, commit.author, commit.keys) == (2, "gina", ["MEMORY.md", "a.md"])
        assert commit.ops == {"put": 1, "delete": 1, "restore": 0}
        team = live.store.snapshot(repo, with_texts=True)
        assert team is not None
        assert team.texts["MEMORY.md"] == "# Team\n- [B](b.md) — second\n"

        restored = client.post(
            f"{page}/restore", data={"key": "a.md", "version": "1", "csrf": csrf}
        )
        assert restored.status_code == 303
        landed = client.get(restored.headers["location"]).text
        assert notice_in(landed) == (
            "Restored a.md to its text of version 1, as version 3. Its line in MEMORY.md is "
            "back too, in the next commit (version 4)."
        )
        team = live.store.snapshot(repo, with_texts=True)
        assert team is not None
        assert team.texts["MEMORY.md"] == "# Team\n- [B](b.md) — second\n- [A](a.md) — first\n"
        assert team.texts["a.md"] == note.format("A")
        # A restore of a note that is listed changes no index.
        again = client.post(f"{page}/restore", data={"key": "a.md", "version": "1", "csrf": csrf})
        assert notice_in(client.get(again.headers["location"]).text) == (
            "a.md already has the text of version 1: nothing changed."
        )
        head = live.store.head(repo)
        assert head is not None
        assert head.version == 4
        # A note no index ever listed: its delete and restore touch no index, and say so.
        csrf = csrf_in(client.get(f"{page}/note", params={"key": "c.md"}).text)
        deleted = client.post(
            f"{page}/delete", data={"key": "c.md", "confirm": "yes", "csrf": csrf}
        )
        assert notice_in(client.get(deleted.headers["location"]).text) == (
            "Deleted c.md for the team (version 5). Restore it below to undo."
        )
        back = client.post(f"{page}/restore", data={"key": "c.md", "version": "1", "csrf": csrf})
        assert notice_in(client.get(back.headers["location"]).text) == (
            "Restored c.md to its text of version 1, as version 6. No version of MEMORY.md in "
            "the history listed it, so no index line links it now (memsync index --fix adds one)."
        )
        # A notice sealed for one session means nothing to another.
        with http_session(live, live.token(repo, name="hugo")) as other:
            other.cookies.set(
                "memsync_ui_notice", restored.cookies["memsync_ui_notice"], path="/ui"
            )
            assert notice_in(other.get(f"{page}/note", params={"key": "a.md"}).text) is None


def test_the_health_of_a_big_repo_without_an_index_is_bounded_and_a_deleted_index_is_named(
    live: LiveServer,
) -> None:
    repo = "acme/big"
    writer = live.token(repo, name="ines")
    notes = {f"n{number:03}.md": f"# Note {number}\n\nText.\n" for number in range(300)}
    put_entries(live, writer, repo, notes)
    with http_session(live, writer) as client:
        html = client.get(f"/ui/repo/{repo}").text
        health = html[html.index('<section id="health">') : html.index("</section>")]
        assert "has no <code>MEMORY.md</code> yet" in health
        assert "Problems: 300 orphan, 300 no-frontmatter" in health
        assert health.count('class="problem-orphan"') == 10
        assert health.count('class="problem-no-frontmatter"') == 10
        assert 'id="more-orphan">and 290 more orphan</li>' in health
        assert "`" not in health
        assert "(<code>memsync index --fix</code> adds a line for it)" in health
        assert len(html) < 200_000  # the notes table still lists all 300

        # An index deleted for the team is named as such, with its undo, never as "missing".
        put_entries(live, writer, repo, {"MEMORY.md": "# Team\n- [Note 0](n000.md)\n"})
        with live.client(writer) as api:
            assert api.delete(f"/v1/team_memory?repo={repo}&key=MEMORY.md").is_success
        html = client.get(f"/ui/repo/{repo}").text
        assert "was deleted for the team by ines" in html
        assert "has no <code>MEMORY.md</code>" not in html
        assert 'id="restore-index"' in html
        restored = client.post(
            f"/ui/repo/{repo}/restore",
            data={"key": "MEMORY.md", "version": "2", "csrf": csrf_in(html)},
        )
        assert restored.status_code == 303
        html = client.get(f"/ui/repo/{repo}").text
        assert 'id="index-deleted"' not in html
        assert "Problems: 299 orphan" in html


def test_error_pages_keep_the_navigation_and_the_text_is_spaced(live: LiveServer) -> None:
    with http_session(live, live.token("acme/*", name="jack")) as client:
        gone = client.get(f"/ui/repo/{REPO}/delete", params={"key": "nothing-here.md"})
        assert gone.status_code == 404
        assert "That note is not live" in gone.text
        assert 'id="sign-out"' in gone.text
        assert 'class="repo-nav"' in gone.text  # the repo's links and search stay
        unknown = client.get("/ui/repo/acme/nowhere")
        assert unknown.status_code == 404
        assert 'id="sign-out"' in unknown.text
        assert 'class="repo-nav"' not in unknown.text  # no links into a repo that is not there
        typo = client.get("/ui/repos")
        assert typo.status_code == 404
        assert "No such page." in typo.text
        assert 'id="sign-out"' in typo.text
        note = client.get(f"/ui/repo/{REPO}/note", params={"key": "style.md"}).text
        assert re.search(r"Last changed by <strong>\w+</strong> at", note)
        hits = client.get(f"/ui/repo/{REPO}/search", params={"q": "code style"}).text
        assert "</a> <strong>Style</strong> — code style <span" in hits


def test_the_server_address_points_to_the_web_page_and_the_api_docs(live: LiveServer) -> None:
    browser_like = httpx.get(f"{live.base_url}/", headers={"Accept": "text/html,*/*;q=0.8"})
    assert browser_like.status_code == 200
    assert browser_like.headers["content-type"].startswith("text/html")
    assert browser_like.headers["content-security-policy"].startswith("default-src 'none'")
    hrefs = re.findall(r'href="([^"]+)"', browser_like.text)
    assert {"/ui/", "/docs", "/redoc", "/openapi.json"} <= set(hrefs)
    program = httpx.get(f"{live.base_url}/")
    assert program.status_code == 200
    links = program.json()["links"]
    assert links["ui"] == "/ui/"
    for path in links.values():  # every link leads somewhere
        assert httpx.get(f"{live.base_url}{path}").status_code == 200, path


# -- the Review inbox of a reviewed repo (issue 28, point 6) -------------------------------

REVIEWED = "acme/reviewed"
REVIEWED_INDEX = "# Team memory\n- [Style](style.md) — code style\n"
REVIEWED_STYLE = "---\nname: Style\ndescription: code style\n---\n\nTabs.\n"


@pytest.fixture(scope="module")
def reviewed(live: LiveServer) -> tuple[str, str]:
    """A reviewed repo of its own, seeded by its reviewer: (rita's token, kim's token).
    rita reviews (acme/*); kim may write to it, and her writes become proposals."""
    _, rita = issue_token(live.store, repo_pattern="acme/*", name="rita", reviewer=True)
    kim = live.token(REVIEWED, name="kim")
    put_entries(live, rita, REVIEWED, {"MEMORY.md": REVIEWED_INDEX, "style.md": REVIEWED_STYLE})
    live.store.set_review(REVIEWED, True)
    return rita, kim


def propose(live: LiveServer, token: str, entries: dict[str, str], **extra: dict[str, str]) -> int:
    """A write into the reviewed repo that the server keeps as a proposal: its id."""
    with live.client(token) as api:
        body = {"entries": entries, **extra}
        answer = api.put(f"/v1/team_memory?repo={REVIEWED}", json=body)
    assert answer.status_code == 202, answer.text[:500]
    number: int = answer.json()["proposal"]["id"]
    return number


def team_text(live: LiveServer, key: str) -> str | None:
    snapshot = live.store.snapshot(REVIEWED, with_texts=True)
    assert snapshot is not None
    return snapshot.texts.get(key)


def test_a_reviewer_accepts_one_proposal_and_rejects_another_in_the_review_inbox(
    live: LiveServer, browser: WebDriver, reviewed: tuple[str, str], tmp_path: Path
) -> None:
    rita, kim = reviewed
    edit = propose(live, kim, {"style.md": REVIEWED_STYLE + "Run `make lint` first.\n"})
    hostile = propose(live, kim, {HOSTILE_KEY: HOSTILE_TEXT})
    overlap = propose(live, kim, {"MEMORY.md": REVIEWED_INDEX.replace("Team", "Our")})
    put_entries(live, rita, REVIEWED, {"MEMORY.md": REVIEWED_INDEX.replace("Team", "Shared")})

    sign_in(browser, live, rita)
    browser.get(f"{live.base_url}/ui/repo/{REVIEWED}")
    assert browser.find_element(By.ID, "review-count").text == "3"
    follow(browser, browser.find_element(By.ID, "review-link"))
    assert [e.get_attribute("id") for e in browser.find_elements(By.CSS_SELECTOR, "article")] == [
        f"proposal-{overlap}",
        f"proposal-{hostile}",
        f"proposal-{edit}",
    ]
    change = browser.find_element(By.ID, f"proposal-{edit}")
    assert [e.text for e in change.find_elements(By.CSS_SELECTOR, ".author")] == ["kim"]
    assert [e.text for e in change.find_elements(By.CSS_SELECTOR, "pre.diff .add")] == [
        "+Run `make lint` first."
    ]
    # The hostile proposal is text on the page: no script ran, no image loaded.
    assert browser.title == f"Review · {REVIEWED} · memsync"
    assert browser.execute_script("return document.scripts.length") == 0
    assert browser.execute_script("return document.images.length") == 0
    assert not browser.find_elements(By.CSS_SELECTOR, "[onerror]")
    shown_hostile = browser.find_element(By.ID, f"proposal-{hostile}").text
    assert HOSTILE_KEY in shown_hostile
    assert "+<img src=x onerror=\"document.title='pwned'\">" in shown_hostile
    screenshot(browser, "review", tmp_path)

    follow(browser, browser.find_element(By.ID, f"accept-{edit}"))
    notice = browser.find_element(By.ID, "notice").text
    assert notice.startswith(f"Accepted proposal {edit}: version ")
    assert team_text(live, "style.md") == REVIEWED_STYLE + "Run `make lint` first.\n"
    commit = live.store.log(REVIEWED, limit=1).commits[0]
    assert (commit.author, commit.accepted_by, commit.keys) == ("kim", "rita", ["style.md"])

    reason = "A guess, not a team rule <b>yet</b>"
    browser.find_element(By.ID, f"reason-{hostile}").send_keys(reason)
    follow(browser, browser.find_element(By.ID, f"reject-{hostile}"))
    assert browser.find_element(By.ID, "notice").text == f"Rejected proposal {hostile} by kim."
    outcome = browser.find_element(By.CSS_SELECTOR, f"#decided-{hostile} .outcome").text
    assert outcome.startswith("rejected by rita at ")
    assert outcome.endswith(f": {reason}")
    assert team_text(live, HOSTILE_KEY) is None

    # The team's index moved under the third proposal on the same line: refused, as a
    # page, and nothing changes.
    follow(browser, browser.find_element(By.ID, f"accept-{overlap}"))
    message = browser.find_element(By.ID, "message").text
    assert message.startswith(f"Proposal {overlap} cannot be accepted: the team's text of")
    assert "MEMORY.md changed since it was written" in message
    assert team_text(live, "MEMORY.md") == REVIEWED_INDEX.replace("Team", "Shared")
    browser.get(f"{live.base_url}/ui/repo/{REVIEWED}/review")
    assert browser.find_element(By.ID, "review-count").text == "1"
    assert browser.find_elements(By.ID, f"accept-{overlap}")


def test_a_non_reviewer_sees_only_their_own_proposals_without_controls_and_forged_posts_fail(
    live: LiveServer, reviewed: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    rita, kim = reviewed
    # A watcher's proposal names its agent in its provenance only (issue 37).
    agent = {"via": "watcher", "agent": "claude-code", "agentVersion": "2.1.197", "session": "5e55"}
    mine = propose(live, kim, {"draft.md": "# Draft\n\nA thought of kim's.\n"}, provenance=agent)
    theirs = propose(live, live.token(REVIEWED, name="lou"), {"lou.md": "# Lou\n"})
    page = f"/ui/repo/{REVIEWED}"
    with http_session(live, kim) as client:
        html = client.get(f"{page}/review").text
        assert f'id="proposal-{mine}"' in html
        assert '<span class="agent">(claude-code 2.1.197, session 5e55)</span>' in html
        assert f'id="proposal-{theirs}"' not in html
        assert "A thought of kim&#39;s." in html
        assert 'id="accept-' not in html
        assert 'id="reject-' not in html
        csrf = csrf_in(html)
        for action, form in (("accept", {}), ("reject", {"reason": "mine"})):
            refused = client.post(
                f"{page}/review/{action}", data={"proposal": str(mine), "csrf": csrf, **form}
            )
            assert refused.status_code == 403
            assert "Only a reviewer may accept or reject proposals." in refused.text
        # A delete on the page from a non-reviewer is a proposal too, and says so.
        confirm = client.get(f"{page}/delete", params={"key": "style.md"}).text
        assert 'id="proposes"' in confirm
        assert "Propose the delete" in confirm
        deleted = client.post(
            f"{page}/delete", data={"key": "style.md", "confirm": "yes", "csrf": csrf}
        )
        assert deleted.status_code == 303
        notice = notice_in(client.get(deleted.headers["location"]).text)
        assert notice is not None
        assert notice.startswith("Proposed deleting style.md: a reviewer must accept it")
        assert team_text(live, "style.md") is not None
    with http_session(live, rita) as client:
        html = client.get(f"{page}/review").text
        assert f'id="accept-{mine}"' in html
        assert f'id="accept-{theirs}"' in html
        csrf = csrf_in(html)
        form = {"proposal": str(mine)}
        assert client.post(f"{page}/review/accept", data=form).status_code == 403
        assert (
            client.post(f"{page}/review/accept", data={**form, "csrf": "x" * 43}).status_code == 403
        )
        for headers in ({"Origin": "https://evil.example"}, {"Sec-Fetch-Site": "cross-site"}):
            forged = client.post(
                f"{page}/review/reject",
                data={**form, "csrf": csrf, "reason": "forged"},
                headers=headers,
            )
            assert forged.status_code == 403
        empty = client.post(f"{page}/review/reject", data={**form, "csrf": csrf, "reason": " "})
        assert empty.status_code == 400
        for number in ("x", "9" * 30, "0"):
            bad = client.post(f"{page}/review/accept", data={"proposal": number, "csrf": csrf})
            assert bad.status_code == 400
        unknown = client.post(f"{page}/review/accept", data={"proposal": "99999", "csrf": csrf})
        assert unknown.status_code == 404
        assert f'id="accept-{mine}"' in client.get(f"{page}/review").text  # still pending
        assert team_text(live, "draft.md") is None
        # One page at a time; a decision on an older page leads back to it.
        monkeypatch.setattr(review, "PAGE", 1)
        newest = client.get(f"{page}/review").text
        assert newest.count('<article class="proposal"') == 1
        assert f'id="proposal-{theirs}"' not in newest
        older = re.search(r'id="older" href="([^"]+)"', newest)
        assert older is not None
        assert f'id="proposal-{theirs}"' in client.get(older[1]).text
        before = older[1].rsplit("=", 1)[1]
        rejected = client.post(
            f"{page}/review/reject",
            data={"proposal": str(theirs), "csrf": csrf, "reason": "Too short", "before": before},
        )
        assert rejected.headers["location"] == f"{page}/review?before={before}"
        # A repo that is not reviewed has no Review link.
        assert 'id="review-link"' not in client.get(f"/ui/repo/{REPO}").text
