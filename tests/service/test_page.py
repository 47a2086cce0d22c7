"""The web page at ``/`` in a real headless Chromium (Debian's chromium and
chromium-driver; ``.ci/run`` installs them): browse the catalog, see a file's
variables, type a query and read its count, draw a histogram of the
selection, and check the screenshot's bars against the local histogram."""

from __future__ import annotations

import io
import os
import shutil
import tempfile

import numpy as np
import pytest
import servers

import quarry

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
MISSING = "no chromium and chromedriver (apt-get install chromium chromium-driver)"
#: CI (.ci/run) installs the browser and sets QUARRY_REQUIRE_BROWSER: there a
#: missing browser fails the test instead of skipping it.
REQUIRED = bool(os.environ.get("QUARRY_REQUIRE_BROWSER"))
pytestmark = pytest.mark.skipif(
    not REQUIRED and (CHROMIUM is None or CHROMEDRIVER is None), reason=MISSING
)
BAR = (0x1F, 0x77, 0xB4)  # the page's bar colour


@pytest.fixture
def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    assert CHROMIUM is not None and CHROMEDRIVER is not None, MISSING
    # A short folder (tmp_path is too long for the socket Chromium makes in
    # its profile: a socket's path holds at most 107 bytes), removed after.
    folder = tempfile.mkdtemp(prefix="chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--window-size=1200,900",
        "--force-device-scale-factor=1",
        f"--user-data-dir={os.path.join(folder, 'profile')}",
    ):
        options.add_argument(flag)
    # The browser's own temporary files go to this test's folder.
    env = {**os.environ, "TMPDIR": folder}
    try:
        driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER, env=env))
        try:
            yield driver
        finally:
            driver.quit()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_the_page_counts_a_query_and_draws_its_histogram(tmp_path, browser):
    from PIL import Image
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as shown
    from selenium.webdriver.support.ui import Select, WebDriverWait

    root = tmp_path / "root"
    path = str(root / "run" / "p.h5")
    servers.particles(path, n=4000, seed=5)
    with quarry.open(path) as ds:
        ds.build_index()
        query = "energy > 0.8 && x < 20"
        expected = ds.query(query).count()
        counts, _ = ds.histogram("/energy", where=query, bins=20)
    with servers.running(servers.config(str(root), str(tmp_path), scan_every=0)) as url:
        browser.get(url + "/")
        wait = WebDriverWait(browser, 30)
        item = wait.until(shown.element_to_be_clickable((By.CSS_SELECTOR, "#datasets li")))
        assert item.text == "run/p.h5 (hdf5, indexed)"
        item.click()
        wait.until(shown.text_to_be_present_in_element((By.ID, "title"), "run/p.h5"))
        rows = browser.find_elements(By.CSS_SELECTOR, "#variables tbody tr")
        assert [r.text.split()[0] for r in rows] == ["/energy", "/id", "/q", "/x"]
        assert rows[3].text == "/x (4000) float32 yes"
        browser.find_element(By.ID, "query").send_keys(query)
        browser.find_element(By.ID, "count-button").click()
        wait.until(lambda b: b.find_element(By.ID, "count").text.isdigit())
        assert int(browser.find_element(By.ID, "count").text) == expected
        Select(browser.find_element(By.ID, "variable")).select_by_value("/energy")
        bins = browser.find_element(By.ID, "bins")
        bins.clear()
        bins.send_keys("20")
        browser.find_element(By.ID, "histogram-button").click()
        canvas = browser.find_element(By.ID, "histogram")
        wait.until(lambda b: canvas.get_attribute("data-drawn"))
        assert int(canvas.get_attribute("data-drawn")) == int(counts.sum()) == expected
        picture = Image.open(io.BytesIO(canvas.screenshot_as_png)).convert("RGB")
        # A query the grammar refuses shows the CLI's message with its caret.
        browser.find_element(By.ID, "query").send_keys(" &&")
        browser.find_element(By.ID, "count-button").click()
        wait.until(lambda b: b.find_element(By.ID, "error").text)
        assert browser.find_element(By.ID, "error").text.rstrip().endswith("^")
    pixels = np.asarray(picture).astype(int)[1:-1, 1:-1]  # inside the canvas' 1px border
    assert pixels.shape[:2] == (320, 640)
    is_bar = (np.abs(pixels - BAR).sum(axis=2) < 60).sum(axis=0)  # bar pixels per column
    assert is_bar.sum() > 0.05 * pixels.shape[0] * pixels.shape[1]  # not blank
    width = (640 - 40) / 20
    for k, c in enumerate(counts):
        middle = int(30 + (k + 0.5) * width)
        assert abs(is_bar[middle] - (320 - 40) * c / counts.max()) <= 2, (k, c)
