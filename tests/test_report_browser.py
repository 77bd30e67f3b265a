"""report.html in a real headless browser: the run's and an evaluation's page render in Chromium with no console
error (a fetch the page's policy blocks is one), every embedded figure decodes, and a screenshot is not blank.

    make test-browser        # installs chromium and chromium-driver (Debian) and selenium, then runs these

Marked `browser`: make test leaves it out (it runs the tiny pipeline and starts a browser). The page's content is
checked in plain Python by tests/test_html_page.py and tests/test_pipeline.py."""

from __future__ import annotations

import io
import shutil

import pytest

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def browser():
    webdriver = pytest.importorskip("selenium.webdriver", reason="make test-browser installs selenium")
    from selenium.webdriver.chrome.service import Service

    chromium, driver_path = shutil.which("chromium") or shutil.which("chromium-browser"), shutil.which("chromedriver")
    if not chromium or not driver_path:
        pytest.skip("chromium and chromedriver are needed (make test-browser installs Debian's packages)")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,1600"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    # The driver binary is given, so Selenium Manager (which would download one) is never run.
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    yield driver
    driver.quit()


def open_page(driver, path) -> dict:
    """Load a file:// page; its console errors, images (loaded, natural width), tables and a screenshot."""
    from PIL import Image

    driver.get_log("browser")  # drop what an earlier page logged
    driver.get(path.resolve().as_uri())
    state = driver.execute_script(
        "return {images: Array.from(document.images).map(i => [i.complete, i.naturalWidth]),"
        " tables: document.querySelectorAll('table').length, title: document.title,"
        " text: document.body.innerText.length}")
    state["errors"] = [e for e in driver.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]
    shot = Image.open(io.BytesIO(driver.get_screenshot_as_png())).convert("L")
    histogram = shot.histogram()
    state["non_white"] = 1 - histogram[255] / sum(histogram)
    state["shades"] = sum(1 for count in histogram if count)
    return state


def test_a_blocked_fetch_is_a_console_error(browser, tmp_path):
    """The check can fail: a page that loads an outside image under the same policy logs an error."""
    from yunshan.io.html_page import markdown_page

    page = tmp_path / "bad.html"
    html = markdown_page("# t\n", "t", tmp_path).replace("</body>", '<img src="http://127.0.0.1:9/x.png"></body>')
    page.write_text(html, encoding="utf-8")
    assert open_page(browser, page)["errors"]


def test_run_and_eval_reports_render(browser, tmp_path):
    from test_pipeline import run, tiny_recipe

    run(tiny_recipe(tmp_path), tmp_path)
    out = tmp_path / "run"
    run_page = open_page(browser, out / "report.html")
    assert run_page["errors"] == [], run_page["errors"]
    assert run_page["title"].startswith("yunshan run:")
    # The loss curves, the forgetting curve: every figure decoded (a broken data: URI has natural width 0).
    assert len(run_page["images"]) >= 3 and all(done and width > 100 for done, width in run_page["images"])
    assert run_page["tables"] >= 5 and run_page["text"] > 1000
    assert run_page["non_white"] > 0.05 and run_page["shades"] > 20  # text, tables and plots: not blank
    eval_pages = sorted(out.glob("*_eval_*/report.html"))
    assert len(eval_pages) == 2
    for page in eval_pages:
        state = open_page(browser, page)
        assert state["errors"] == [] and state["tables"] >= 2 and state["non_white"] > 0.01, (page, state)
