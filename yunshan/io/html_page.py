"""report.html: a Markdown report as one self-contained page that a person opens in a browser, offline.

    from yunshan.io.html_page import write_page
    write_page("runs/demo_tiny/report.md", "runs/demo_tiny/report.html", "yunshan run: yunshan-demo-tiny")

`yunshan run` and `yunshan eval` write their report in Markdown (report.md, results.md) and this page beside it. The
page is that same Markdown, so the two never disagree, rendered by Python-Markdown (tables extension), with every
image the Markdown names embedded as a `data:` URI and the stylesheet inline. It loads nothing from anywhere: no
script, font, stylesheet or image is fetched (its Content-Security-Policy forbids every fetch but `data:` images),
so it opens offline and can be mailed or archived as one file. An image file that is missing is named on the page
instead of leaving a broken link.

Text is escaped before rendering (a `<` in a file name or a label stays text); code spans are left to Markdown,
which escapes them itself.
"""

from __future__ import annotations

import base64
import html
import re
from pathlib import Path

IMAGE = re.compile(r"^!\[([^\]]*)\]\(([^)\s]+)\)[ \t]*$", re.MULTILINE)
MIME = {".png": "image/png", ".svg": "image/svg+xml", ".jpg": "image/jpeg", ".jpeg": "image/jpeg"}

STYLE = """
body { font-family: -apple-system, "Segoe UI", "Noto Sans", "Noto Sans CJK SC", "PingFang SC", sans-serif;
       margin: 2rem auto; max-width: 72rem; padding: 0 1.5rem; color: #1f2328; background: #fff; line-height: 1.5; }
h1 { border-bottom: 2px solid #d0d7de; padding-bottom: .3rem; }
h2 { border-bottom: 1px solid #d0d7de; padding-bottom: .2rem; margin-top: 2.2rem; }
table { border-collapse: collapse; margin: .8rem 0; font-size: .92rem; }
th, td { border: 1px solid #d0d7de; padding: .3rem .65rem; }
th { background: #f3f5f7; }
tr:nth-child(even) td { background: #fafbfc; }
code { background: #f3f5f7; padding: .1rem .3rem; border-radius: 4px; font-size: .88em; }
figure { margin: 1rem 0; }
figure img { max-width: 100%; border: 1px solid #d0d7de; }
figcaption { color: #57606a; font-size: .9rem; }
.missing { color: #9a6700; }
footer { color: #57606a; font-size: .85rem; margin-top: 3rem; }
"""


def _escape_text(markdown_text: str) -> str:
    """Escape `<` outside code spans, so text that looks like a tag stays text (Markdown passes raw HTML)."""
    out = []
    for line in markdown_text.split("\n"):
        parts = line.split("`")
        for i in range(0, len(parts), 2):  # even parts lie outside code spans
            parts[i] = parts[i].replace("<", "&lt;")
        out.append("`".join(parts))
    return "\n".join(out)


def _figure(caption: str, target: str, base: Path) -> str:
    path = (base / target) if not Path(target).is_absolute() else Path(target)
    mime = MIME.get(path.suffix.lower())
    if mime is None or not path.is_file():
        return f'<p class="missing">(figure not found: {html.escape(target)})</p>'
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    return (f'<figure><img alt="{html.escape(caption)}" src="data:{mime};base64,{data}">'
            f"<figcaption>{html.escape(caption)}</figcaption></figure>")


def markdown_page(markdown_text: str, title: str, base: str | Path) -> str:
    """The page for `markdown_text`; images are read relative to `base`."""
    import markdown

    base = Path(base)
    figures: list[str] = []

    def keep(match: re.Match) -> str:
        # A placeholder paragraph the figure's HTML replaces after rendering (Markdown would escape it otherwise).
        figures.append(_figure(match.group(1), match.group(2), base))
        return f"YUNSHANFIGURE{len(figures) - 1}END"

    text = IMAGE.sub(keep, markdown_text)
    body = markdown.markdown(_escape_text(text), extensions=["tables"], output_format="html")
    for i, figure in enumerate(figures):
        body = body.replace(f"<p>YUNSHANFIGURE{i}END</p>", figure).replace(f"YUNSHANFIGURE{i}END", figure)
    policy = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"
    return (f'<!DOCTYPE html>\n<html lang="zh-Hans">\n<head>\n<meta charset="utf-8">\n'
            f'<meta http-equiv="Content-Security-Policy" content="{policy}">\n'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f"<title>{html.escape(title)}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n{body}\n"
            f"<footer>Written by yunshan; the same content as the Markdown report beside this file.</footer>\n"
            "</body>\n</html>\n")


def write_page(markdown_path: str | Path, html_path: str | Path, title: str) -> Path:
    """Render the Markdown file into `html_path` (images relative to the Markdown file's folder)."""
    markdown_path, html_path = Path(markdown_path), Path(html_path)
    text = markdown_path.read_text(encoding="utf-8")
    html_path.write_text(markdown_page(text, title, markdown_path.parent), encoding="utf-8")
    return html_path
