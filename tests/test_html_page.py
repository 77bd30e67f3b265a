"""report.html (yunshan.io.html_page): the Markdown report as one self-contained page: tables rendered, every figure
embedded as a data: URI, text that looks like a tag kept as text, nothing fetched from anywhere. The page is opened
in a real browser by tests/test_report_browser.py (make test-browser)."""

import base64
import re

from yunshan.io.html_page import markdown_page, write_page


def png(path, color=(200, 30, 30)):
    from PIL import Image

    Image.new("RGB", (40, 20), color).save(path)
    return path


def test_tables_figures_and_escaping(tmp_path):
    png(tmp_path / "curves.png")
    (tmp_path / "plots").mkdir()
    png(tmp_path / "plots" / "second.png", (0, 0, 200))
    md = tmp_path / "report.md"
    md.write_text("# yunshan run: demo\n\n| metric | base | after |\n|---|---:|---:|\n| bpc <general> | 1.5 | 1.4 |\n\n"
                  "![loss curves](curves.png)\n\n![second](plots/second.png)\n\n![gone](missing.png)\n\n"
                  "a `<code>` span & an ampersand\n", encoding="utf-8")
    page = write_page(md, tmp_path / "report.html", "yunshan run: <demo>").read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and "<title>yunshan run: &lt;demo&gt;</title>" in page
    assert re.search(r"<th[^>]*>metric</th>", page) and re.search(r"<td[^>]*>1\.4</td>", page)
    assert "bpc &lt;general&gt;" in page and "<general>" not in page  # text, not a tag
    assert "<code>&lt;code&gt;</code>" in page and "&amp; an ampersand" in page
    # Each figure is its own element with the file's exact bytes; a missing one is named, never a broken link.
    images = re.findall(r'<img alt="([^"]*)" src="data:image/png;base64,([^"]+)">', page)
    assert [alt for alt, _ in images] == ["loss curves", "second"]
    assert base64.b64decode(images[1][1]) == (tmp_path / "plots" / "second.png").read_bytes()
    assert "<p><figure>" not in page and '<p class="missing">(figure not found: missing.png)</p>' in page
    # Self-contained: no URL to fetch, and the policy forbids every fetch but data: images.
    assert not re.search(r'(src|href)="(?!data:)', page) and "http" not in page.split("</head>")[1]
    assert "default-src 'none'; img-src data:" in page


def test_the_page_is_the_markdown(tmp_path):
    """The HTML carries the Markdown's text: every table cell and heading of the report is on the page."""
    text = "# t\n\n## Stages\n\n| stage | seconds |\n|---|---:|\n| cpt | 12.5 |\n| sft | 3.0 |\n"
    page = markdown_page(text, "t", tmp_path)
    assert "<h2>Stages</h2>" in page and page.count("<tr>") == 3 and "12.5" in page
