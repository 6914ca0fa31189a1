"""Small files of the formats the converters are not needed for, written in the test
(OpenDocument and EPUB packages by hand, e-mail by the standard library, a page image by
Pillow): nothing binary is committed. tests/integration/test_converted_formats.py reads
what pandoc and LibreOffice write."""

from __future__ import annotations

import io
import zipfile
from email.message import EmailMessage

from PIL import Image, ImageDraw, ImageFont

ODF_NS = (
    'xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
    'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" '
    'xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" '
    'xmlns:draw="urn:oasis:names:tc:opendocument:xmlns:drawing:1.0" '
    'xmlns:presentation="urn:oasis:names:tc:opendocument:xmlns:presentation:1.0"'
)


def odf_package(mime_type: str, body: str, *, manifest: str = "<manifest/>", prolog: str = "") -> bytes:
    """An OpenDocument package: `mimetype` first, stored, then content.xml around `body`."""
    content = (
        f'<?xml version="1.0" encoding="UTF-8"?>{prolog}<office:document-content {ODF_NS}>'
        f"<office:body>{body}</office:body></office:document-content>"
    )
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr(zipfile.ZipInfo("mimetype"), mime_type)
        archive.writestr("content.xml", content, compress_type=zipfile.ZIP_DEFLATED)
        archive.writestr("META-INF/manifest.xml", manifest)
    return buffer.getvalue()


def odt_bytes() -> bytes:
    return odf_package(
        "application/vnd.oasis.opendocument.text",
        "<office:text>"
        '<text:h text:outline-level="1">Replication</text:h>'
        "<text:p>A standby replays WAL<text:s/> shipped by the primary named<text:s text:c='2'/>amber-falcon.</text:p>"
        '<text:h text:outline-level="2">Slots</text:h>'
        "<text:list><text:list-item><text:p>slot one</text:p></text:list-item>"
        "<text:list-item><text:p>slot two</text:p></text:list-item></text:list>"
        "<table:table><table:table-row><table:table-cell><text:p>Setting</text:p></table:table-cell>"
        "<table:table-cell><text:p>Value</text:p></table:table-cell></table:table-row>"
        "<table:table-row><table:table-cell><text:p>max_wal_senders</text:p></table:table-cell>"
        "<table:table-cell><text:p>10</text:p></table:table-cell></table:table-row></table:table>"
        "</office:text>",
    )


def ods_bytes(repeated_rows: int = 3) -> bytes:
    return odf_package(
        "application/vnd.oasis.opendocument.spreadsheet",
        '<office:spreadsheet><table:table table:name="Quotas">'
        "<table:table-row><table:table-cell><text:p>Tenant</text:p></table:table-cell>"
        "<table:table-cell><text:p>Quota</text:p></table:table-cell></table:table-row>"
        f'<table:table-row table:number-rows-repeated="{repeated_rows}">'
        '<table:table-cell table:number-columns-repeated="2"><text:p>same</text:p></table:table-cell></table:table-row>'
        '<table:table-row table:number-rows-repeated="1048000"><table:table-cell table:number-columns-repeated="1024"/>'
        "</table:table-row></table:table></office:spreadsheet>",
    )


def odp_bytes() -> bytes:
    return odf_package(
        "application/vnd.oasis.opendocument.presentation",
        '<office:presentation><draw:page draw:name="page1">'
        '<draw:frame presentation:class="title"><draw:text-box><text:p>Roadmap</text:p></draw:text-box></draw:frame>'
        "<draw:frame><draw:text-box><text:p>Partitioning lands in the cobalt-heron release.</text:p>"
        "</draw:text-box></draw:frame>"
        "<presentation:notes><draw:frame><draw:text-box><text:p>Speaker: mention pruning.</text:p></draw:text-box>"
        "</draw:frame></presentation:notes></draw:page>"
        '<draw:page draw:name="page2"><draw:frame><draw:text-box><text:p>Questions</text:p>'
        "</draw:text-box></draw:frame>"
        "</draw:page></office:presentation>",
    )


def epub_bytes(*, spine: bool = True) -> bytes:
    chapter = (
        '<?xml version="1.0" encoding="UTF-8"?><html xmlns="http://www.w3.org/1999/xhtml"><head><title>c</title>'
        "</head><body><h1>{title}</h1><p>{text}</p></body></html>"
    )
    package = (
        '<?xml version="1.0"?><package xmlns="http://www.idpf.org/2007/opf" version="3.0">'
        '<metadata xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:title>Operations Guide</dc:title></metadata>'
        '<manifest><item id="c2" href="text/two.xhtml" media-type="application/xhtml+xml"/>'
        '<item id="c1" href="text/one%20a.xhtml" media-type="application/xhtml+xml"/>'
        '<item id="css" href="style.css" media-type="text/css"/></manifest>'
        + ('<spine><itemref idref="c1"/><itemref idref="c2"/></spine>' if spine else "<spine/>")
        + "</package>"
    )
    container = (
        '<?xml version="1.0"?><container xmlns="urn:oasis:names:tc:opendocument:xmlns:container" version="1.0">'
        '<rootfiles><rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/>'
        "</rootfiles></container>"
    )
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr(zipfile.ZipInfo("mimetype"), "application/epub+zip")
        archive.writestr("META-INF/container.xml", container)
        archive.writestr("OEBPS/content.opf", package)
        archive.writestr("OEBPS/style.css", "h1 { color: red }")
        archive.writestr(
            "OEBPS/text/one a.xhtml", chapter.format(title="Backups", text="Base backups use pg_basebackup.")
        )
        archive.writestr(
            "OEBPS/text/two.xhtml", chapter.format(title="Restores", text="Restore to the violet-marsh point.")
        )
    return buffer.getvalue()


def eml_bytes(attachments: int = 1) -> bytes:
    message = EmailMessage()
    message["From"] = "Ana <ana@example.com>"
    message["To"] = "ops@example.com"
    message["Subject"] = "Vacuum report"
    message["Date"] = "Tue, 01 Dec 2026 10:00:00 +0000"
    message.set_content("Plain: autovacuum fell behind.")
    message.add_alternative(
        "<html><body><h1>Findings</h1><p>Autovacuum fell behind on the copper-lynx table.</p></body></html>",
        subtype="html",
    )
    message.add_attachment(
        b"# Bloat\n\nThe estimate for copper-lynx is 40 percent.\n",
        maintype="text",
        subtype="markdown",
        filename="bloat.md",
    )
    for number in range(1, attachments):
        message.add_attachment(f"note {number}\n".encode(), maintype="text", subtype="plain", filename=f"n{number}.txt")
    return message.as_bytes()


def page_image(lines: list[str], *, image_format: str = "PNG") -> bytes:
    """Black text on white, large enough for OCR, in the given format."""
    image = Image.new("L", (1400, 90 * len(lines) + 80), 255)
    draw = ImageDraw.Draw(image)
    font = ImageFont.load_default(size=40)
    for number, line in enumerate(lines):
        draw.text((50, 40 + 90 * number), line, font=font, fill=0)
    buffer = io.BytesIO()
    image.save(buffer, image_format)
    return buffer.getvalue()
