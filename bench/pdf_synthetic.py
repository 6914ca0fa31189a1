"""PDFs bench/pdf_quality.py makes itself, with real renderers, where the truth is known: the
HTML (or troff source) they were printed from.

  groff-pic        groff's pic manual (pic.ms of the `groff` package) through `groff -ms -Tpdf`
                   (gropdf); its twin is the package's own HTML of it (grohtml)
  groff-man        groff(7), the man page of the `groff` package, through `groff -man -Tpdf`
                   and, for the twin, `groff -man -Thtml`
  chromium-newsletter  two CSS columns; Chromium's own header and footer (date, title, URL,
                   page x/y: --no-pdf-header-footer not passed)
  chromium-paper   a two-column paper, justified and hyphenated, numbered headings, tables
                   across both columns, a running header and footer (CSS @page margin boxes)
  chromium-report  one column, many tables, CSS @page margin boxes (a running title, page
                   numbers)
  libreoffice-docx HTML -> pandoc -> DOCX -> `soffice --headless --convert-to pdf`
  libreoffice-odt  HTML -> pandoc -> ODT -> the same

The words are the Linux-PAM guides' (libpam-doc's HTML: its paragraphs and headings in
order); the tables are made of seeded draws. A tool that is missing skips its documents
with a line.
"""

from __future__ import annotations

import gzip
import html
import random
import shutil
import subprocess
import tempfile
from pathlib import Path

from bs4 import BeautifulSoup
from pdf_corpus import CACHE, D, Document, pdf_facts, unpacked

MADE = CACHE / "made"
PAM = f"{D}/libpam-doc/html"
MODULES = (
    "pam_unix pam_env pam_limits pam_deny pam_permit pam_access pam_time pam_wheel pam_nologin pam_faildelay".split()
)
TYPES = ("auth", "account", "password", "session")
CONTROLS = ("required", "requisite", "sufficient", "optional")


def _chapters(index: Path) -> list[Path]:
    """The guide's pages in the order its table of contents links them."""
    soup = BeautifulSoup(index.read_bytes(), "lxml")
    names = dict.fromkeys(str(a["href"]).split("#")[0] for a in soup.select("div.toc a[href]"))
    return [index.with_name(name) for name in names if name and (index.parent / name).is_file()]


def _blocks(files: list[Path]) -> list[tuple[str, str]]:
    """("h", heading) and ("p", paragraph of 12 words or more), in document order."""
    blocks: list[tuple[str, str]] = []
    for path in files:
        soup = BeautifulSoup(path.read_bytes(), "lxml")
        for element in (soup.body or soup).find_all(["h2", "h3", "p"]):
            if element.find_parent(["table", "pre"]) or element.find_parent(class_=["toc", "navheader", "navfooter"]):
                continue
            text = " ".join(element.get_text().split())
            if element.name == "p" and len(text.split()) >= 12:
                blocks.append(("p", text))
            elif element.name != "p" and 2 <= len(text) <= 80:
                blocks.append(("h", text.lstrip("0123456789. ")))
    return blocks


def _table(rng: random.Random, words: list[str], rows: int) -> str:
    cells = ["Module", "Type", "Control", "Calls", "Notes"]
    out = ["<table><thead><tr>" + "".join(f"<th>{c}</th>" for c in cells) + "</tr></thead><tbody>"]
    for _ in range(rows):
        note = " ".join(rng.sample(words, rng.randint(2, 4)))
        row = (rng.choice(MODULES), rng.choice(TYPES), rng.choice(CONTROLS), str(rng.randint(1, 9999)), note)
        out.append("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>")
    return "\n".join(out) + "</tbody></table>"


def _body(blocks: list[tuple[str, str]], rng: random.Random, *, tables: int, numbered: bool, lists: bool) -> str:
    words = sorted({w for _k, t in blocks for w in t.split() if w.isalpha() and len(w) > 3})
    parts, section, sub, since_table = [], 0, 0, 0
    for kind, text in blocks:
        if kind == "h":
            level = 2 if section == 0 or rng.random() < 0.5 else 3
            section, sub = (section + 1, 0) if level == 2 else (section, sub + 1)
            number = (f"{section}. " if level == 2 else f"{section}.{sub} ") if numbered else ""
            parts.append(f"<h{level}>{number}{html.escape(text)}</h{level}>")
            continue
        parts.append(f"<p>{html.escape(text)}</p>")
        since_table += 1
        if tables and since_table >= tables:
            parts.append(_table(rng, words, rng.randint(5, 9)))
            since_table = 0
        elif lists and rng.random() < 0.08:
            items = [t for k, t in rng.sample(blocks, 3) if k == "p"]
            parts.append("<ul>" + "".join(f"<li>{html.escape(i)}</li>" for i in items) + "</ul>")
    return "\n".join(parts)


STYLE = "body{font-family:serif;font-size:11pt;line-height:1.3} table{border-collapse:collapse;margin:6pt 0}"
STYLE += " td,th{border:1px solid #888;padding:2pt 4pt;font-size:9pt}"
LAYOUTS = {
    "chromium-newsletter": (
        "Linux-PAM Newsletter",
        ".cols{column-count:2;column-gap:18pt} h2,h3{break-after:avoid} table{column-span:all}",
        "",
        dict(tables=14, numbered=False, lists=True),
    ),
    "chromium-paper": (
        "Pluggable Authentication in Practice",
        "@page{margin:22mm 16mm; @top-left{content:'Proceedings of the Workshop on Pluggable Authentication';"
        "font-size:8pt} @top-right{content:'Preprint';font-size:8pt} @bottom-center{content:'Draft for review, "
        "page ' counter(page);font-size:8pt}} .cols{column-count:2;column-gap:14pt;text-align:justify;"
        "hyphens:auto} table{column-span:all}",
        "",
        dict(tables=9, numbered=True, lists=False),
    ),
    "chromium-report": (
        "Module Review Report",
        '@page{margin:20mm; @top-center{content:"Module Review Report, Linux-PAM";font-size:8pt}'
        " @bottom-right{content:counter(page);font-size:8pt}}",
        "",
        dict(tables=4, numbered=True, lists=True),
    ),
    "libreoffice-docx": ("Application Developers Guide", "", "", dict(tables=8, numbered=False, lists=True)),
    "libreoffice-odt": ("Module Writers Guide", "", "", dict(tables=8, numbered=True, lists=False)),
}
SOURCES = {
    "chromium-newsletter": ("Linux-PAM_SAG.html", 0, 220),
    "chromium-paper": ("Linux-PAM_SAG.html", 220, 440),
    "chromium-report": ("Linux-PAM_ADG.html", 0, 100),
    "libreoffice-docx": ("Linux-PAM_ADG.html", 100, 197),
    "libreoffice-odt": ("Linux-PAM_MWG.html", 0, 184),
}


def _page(name: str, blocks: list[tuple[str, str]]) -> str:
    title, css, running, options = LAYOUTS[name]
    body = _body(blocks, random.Random(name), **options)  # type: ignore[arg-type]
    return (
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{title}</title>"
        f"<style>{STYLE} {css}</style></head><body>{running}<h1>{title}</h1>"
        f"<div class='cols'>{body}</div></body></html>"
    )


def _run(command: list[str], cwd: Path | None = None) -> bool:
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, check=False, timeout=300)
    return done.returncode == 0


def _chromium(source: Path, target: Path, header_footer: bool) -> bool:
    browser = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if browser is None:
        return False
    flags = [] if header_footer else ["--no-pdf-header-footer"]
    with tempfile.TemporaryDirectory() as profile:
        command = [browser, "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={profile}", *flags]
        return _run([*command, f"--print-to-pdf={target}", source.as_uri()]) and target.is_file()


def _libreoffice(source: Path, target: Path) -> bool:
    pandoc, soffice = shutil.which("pandoc"), shutil.which("soffice")
    if pandoc is None or soffice is None:
        return False
    office = source.with_suffix(".docx" if "docx" in target.name else ".odt")
    if not _run([pandoc, str(source), "-f", "html", "-o", str(office)]):
        return False
    with tempfile.TemporaryDirectory() as profile:
        profile_uri = Path(profile).as_uri()
        command = [soffice, f"-env:UserInstallation={profile_uri}", "--headless", "--convert-to", "pdf"]
        ok = _run([*command, "--outdir", str(target.parent), str(office)])
    made = target.parent / f"{office.stem}.pdf"
    return ok and made.is_file()


def _groff(source: Path, target: Path, macros: str, device: str) -> bool:
    if shutil.which("groff") is None:
        return False
    with gzip.open(source, "rb") as text:
        command = ["groff", "-p", "-t", macros, f"-T{device}"]
        done = subprocess.run(command, input=text.read(), capture_output=True, cwd=MADE, check=False)
    if done.returncode != 0 or not done.stdout:
        return False
    target.write_bytes(done.stdout)
    return True


def _ghostscript(source: Path, target: Path, macros: str) -> bool:
    """groff's PostScript through Ghostscript's ps2pdf: the groff/Ghostscript toolchain of
    Debian's man-page PDFs (gropdf, groff's own PDF writer, is another)."""
    postscript = target.with_suffix(".ps")
    if shutil.which("ps2pdf") is None or not _groff(source, postscript, macros, "ps"):
        return False
    return _run(["ps2pdf", str(postscript), str(target)]) and target.is_file()


def made_documents(names: tuple[str, ...] | None = None) -> list[Document]:
    MADE.mkdir(parents=True, exist_ok=True)
    documents = []
    groff = unpacked("groff")
    if groff is not None and (names is None or {"groff-pic", "groff-man", "groff-pic-gs", "groff-man-gs"} & set(names)):
        base = groff / f"{D}/groff-base"
        pic, man = MADE / "groff-pic.pdf", MADE / "groff-man.pdf"
        twin_html = sorted(base.glob("html/pic*.html"), key=lambda p: int("0" + "".join(filter(str.isdigit, p.stem))))
        if (pic.is_file() or _groff(base / "pic.ms.gz", pic, "-ms", "pdf")) and twin_html:
            documents.append(Document("groff-pic", "groff/gropdf", pic, twin_html))
        page = groff / "usr/share/man/man7/groff.7.gz"
        man_html = MADE / "groff-man.html"
        if (man.is_file() or _groff(page, man, "-man", "pdf")) and (
            man_html.is_file() or _groff(page, man_html, "-man", "html")
        ):
            documents.append(Document("groff-man", "groff/gropdf", man, [man_html]))
        for name, source, twin, macros in (
            ("groff-pic-gs", base / "pic.ms.gz", twin_html, "-ms"),
            ("groff-man-gs", page, [man_html], "-man"),
        ):
            made = MADE / f"{name}.pdf"
            if (made.is_file() or _ghostscript(source, made, macros)) and all(p.is_file() for p in twin):
                documents.append(Document(name, "groff/Ghostscript", made, list(twin)))
            else:
                print(f"skipped {name}: groff -Tps | ps2pdf failed (apt-get install groff ghostscript)", flush=True)
        if not documents:
            print("skipped groff-pic, groff-man: `groff -Tpdf` failed (apt-get install groff)", flush=True)
    pam = unpacked("libpam-doc")
    for name, (file, first, last) in SOURCES.items():
        if pam is None or (names is not None and name not in names):
            continue
        source, target = MADE / f"{name}.html", MADE / f"{name}.pdf"
        if not target.is_file():
            source.write_text(_page(name, _blocks(_chapters(pam / PAM / file))[first:last]), encoding="utf-8")
            if name.startswith("chromium"):
                ok = _chromium(source, target, header_footer=name == "chromium-newsletter")
            else:
                ok = _libreoffice(source, target)
            if not ok:
                print(f"skipped {name}: {'chromium' if 'chromium' in name else 'pandoc or soffice'} failed", flush=True)
                continue
        kind = "Chromium print" if name.startswith("chromium") else "LibreOffice export"
        documents.append(Document(name, kind, target, [source]))
    for document in documents:
        document.pages, document.outline, document.producer = pdf_facts(document.pdf)
    return documents
