"""The corpus of bench/pdf_quality.py: PDFs whose words and headings are known from an HTML
twin of the same document.

Debian documentation packages that ship one document as PDF and as HTML (`apt-get download`
+ `dpkg-deb -x` into the cache, no root needed), pinned below by package and path. A package
the mirror lacks is skipped with a line. Held out for the check outside the repository, never
used here (not even downloaded): r-doc-pdf, r-doc-html, bash-doc, nettle-dev,
developers-reference, auto-multiple-choice-doc, auto-multiple-choice-doc-pdf,
debian-reference-en, docbook-xsl-doc-pdf, docbook-xsl-doc-html, valgrind, debian-policy,
bzip2-doc, fontconfig, gnuplot-doc, freefem-doc, ghostscript-doc, octave-doc, debian-faq.

The PDFs made here from a known source are bench/pdf_synthetic.py's. Nothing of either is
committed: all of it lives in the cache (~/.cache/ingestion-pipeline-bench/pdf).
"""

from __future__ import annotations

import gzip
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from sphinxindex import CACHE as BENCH_CACHE

CACHE = BENCH_CACHE / "pdf"
D = "usr/share/doc"
HELD_OUT = frozenset(
    "r-doc-pdf r-doc-html bash-doc nettle-dev developers-reference auto-multiple-choice-doc "
    "auto-multiple-choice-doc-pdf debian-reference-en docbook-xsl-doc-pdf docbook-xsl-doc-html valgrind "
    "debian-policy bzip2-doc fontconfig gnuplot-doc freefem-doc ghostscript-doc octave-doc debian-faq".split()
)


@dataclass(frozen=True)
class Spec:
    name: str
    source: str  # the toolchain family, for the per-source breakdown
    package: str  # the package of the PDF
    pdf: str  # its path in the package (a .gz of it is read as well)
    html: tuple[str, ...]  # globs of the twin's files in `html_package`
    html_package: str = ""  # default: `package`
    exclude: tuple[str, ...] = ()  # twin files (names) that are not the document

    @property
    def twin_package(self) -> str:
        return self.html_package or self.package


TEXINFO, DBLATEX, FOP = "texinfo/pdfTeX", "DocBook/dblatex", "DocBook/Apache FOP"
XORG = f"{D}/xorg-docs"
SPECS = (
    Spec(
        "gnu-standards",
        TEXINFO,
        "gnu-standards",
        f"{D}/gnu-standards/standards.pdf",
        (f"{D}/gnu-standards/standards.html",),
    ),
    Spec(
        "gnu-maintain",
        TEXINFO,
        "gnu-standards",
        f"{D}/gnu-standards/maintain.pdf",
        (f"{D}/gnu-standards/maintain.html",),
    ),
    Spec(
        "libgcrypt",
        TEXINFO,
        "libgcrypt20-doc",
        f"{D}/libgcrypt20-doc/gcrypt.pdf",
        (f"{D}/libgcrypt20-doc/html/*.html",),
    ),
    Spec("flex", TEXINFO, "flex-doc", f"{D}/flex-doc/flex.pdf", (f"{D}/flex-doc/html/*.html",)),
    Spec("asymptote", TEXINFO, "asymptote-doc", f"{D}/asymptote/asymptote.pdf", (f"{D}/asymptote/html/*.html",)),
    Spec("zsh", TEXINFO, "zsh-doc", f"{D}/zsh-common/zsh.pdf", (f"{D}/zsh-common/html/*.html",), exclude=("FAQ*",)),
    Spec("doxygen", "Doxygen/LaTeX", "doxygen-doc", f"{D}/doxygen/doxygen_manual.pdf", (f"{D}/doxygen/html/*.html",)),
    Spec(
        "why3",
        "Sphinx/LaTeX",
        "why3-doc-pdf",
        f"{D}/why3-doc-pdf/manual.pdf",
        (f"{D}/why3-doc-html/html/*.html",),
        html_package="why3-doc-html",
        exclude=("genindex.html", "search.html"),
    ),
    Spec(
        "debmake", DBLATEX, "debmake-doc", f"{D}/debmake-doc/debmake-doc.en.pdf", (f"{D}/debmake-doc/html/*.en.html",)
    ),
    Spec(
        "maint-guide",
        DBLATEX,
        "maint-guide",
        f"{D}/maint-guide/maint-guide.en.pdf",
        (f"{D}/maint-guide/html/*.en.html",),
    ),
    Spec(
        "install-guide",
        DBLATEX,
        "installation-guide-amd64",
        f"{D}/installation-guide-amd64/en/install.en.pdf",
        (f"{D}/installation-guide-amd64/en/*.html",),
    ),
    Spec(
        "shared-mime-info",
        "DocBook/LaTeX",
        "shared-mime-info",
        f"{D}/shared-mime-info/shared-mime-info-spec.pdf",
        (f"{D}/shared-mime-info/shared-mime-info-spec.html/*.html",),
    ),
    Spec(
        "camlidl",
        "LaTeX/HeVeA (no outline)",
        "camlidl-doc",
        f"{D}/camlidl/camlidl-1.04.doc.pdf",
        (f"{D}/camlidl/html/main*.html",),
    ),
    *(
        Spec(f"xorg-{name}", FOP, "xorg-docs", f"{XORG}/{folder}{name}.pdf", (f"{XORG}/{folder}{name}.html",))
        for folder, name in (
            ("icccm/", "icccm"),
            ("xlfd/", "xlfd"),
            ("Xserver/", "analysis"),
            ("", "ReleaseNotes"),
            ("fonts/", "fonts"),
        )
    ),
)
# --quick: these only (about 450 pages, each toolchain once)
QUICK = ("gnu-maintain", "flex", "why3", "maint-guide", "shared-mime-info", "camlidl", "xorg-xlfd")


@dataclass
class Document:
    name: str
    source: str
    pdf: Path  # a copy under CACHE/files/, named after the document
    html: list[Path]
    pages: int = 0
    outline: bool = False
    producer: str = ""


def unpacked(package: str, cache: Path = CACHE) -> Path | None:
    """The package unpacked under the cache; None (with a line) when it cannot be had."""
    if package in HELD_OUT:
        raise SystemExit(f"{package} is held out: never use it")
    folder = cache / "unpacked" / package
    if folder.is_dir():
        return folder
    debs = cache / "debs"
    debs.mkdir(parents=True, exist_ok=True)
    if not list(debs.glob(f"{package}_*.deb")):
        print(f"downloading {package} (apt-get download)", file=sys.stderr, flush=True)
        got = subprocess.run(["apt-get", "download", package], cwd=debs, capture_output=True, text=True, check=False)
        if got.returncode != 0:
            print(f"skipped {package}: not on the mirror ({got.stderr.strip()[-160:]})", flush=True)
            return None
    deb = sorted(debs.glob(f"{package}_*.deb"))[-1]
    folder.parent.mkdir(parents=True, exist_ok=True)  # dpkg-deb -x makes the folder, not its parents
    subprocess.run(["dpkg-deb", "-x", str(deb), str(folder)], check=True)
    return folder


def pdf_facts(path: Path) -> tuple[int, bool, str]:
    """Pages, whether it has an outline, and its producer (Creator / Producer)."""
    import pypdfium2 as pdfium

    document = pdfium.PdfDocument(str(path))
    try:
        pages, outline = len(document), next(iter(document.get_toc()), None) is not None
        meta = document.get_metadata_dict()
    finally:
        document.close()
    producer = " / ".join(v for v in (meta.get("Creator", ""), meta.get("Producer", "")) if v)
    return pages, outline, producer


def file_copy(source: Path, name: str, cache: Path = CACHE) -> Path:
    """The PDF under CACHE/files/<name>.pdf (gunzipped when the package ships it gzipped)."""
    target = cache / "files" / f"{name}.pdf"
    if not target.is_file():
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_file():
            shutil.copyfile(source, target)
        else:
            with gzip.open(source.with_name(source.name + ".gz")) as packed, target.open("wb") as out:
                shutil.copyfileobj(packed, out)
    return target


def debian_documents(names: tuple[str, ...] | None = None, cache: Path = CACHE) -> list[Document]:
    documents = []
    for spec in SPECS:
        if names is not None and spec.name not in names:
            continue
        folder, twin = unpacked(spec.package, cache), unpacked(spec.twin_package, cache)
        if folder is None or twin is None:
            continue
        pdf = folder / spec.pdf
        if not pdf.is_file() and not pdf.with_name(pdf.name + ".gz").is_file():
            print(f"skipped {spec.name}: {spec.package} has no {spec.pdf}", flush=True)
            continue
        html = [
            path
            for pattern in spec.html
            for path in sorted(twin.glob(pattern))
            if not any(path.match(excluded) for excluded in spec.exclude)
        ]
        if not html:
            print(f"skipped {spec.name}: {spec.twin_package} has no {spec.html}", flush=True)
            continue
        copy = file_copy(pdf, spec.name, cache)
        documents.append(Document(spec.name, spec.source, copy, html, *pdf_facts(copy)))
    return documents
