"""E-mail (.eml, RFC 5322) with the standard library's `email` package.

The message is page 1: its first section is headed by the subject and starts with the
From/To/Cc/Date lines; the body follows (the HTML alternative preferred, read as HTML, so
its headings become sections; else the plain text). Each attachment is parsed like an
upload of its own (a PDF, a DOCX, another e-mail, a scan) and becomes pages and sections
of the same document, under a section headed "Attachment: NAME": one search hit leads to
the message it came with. At most MAX_ATTACHMENTS are read; an attachment that cannot be
read, and those past the limit, are named in the document's notes.
"""

from __future__ import annotations

from collections.abc import Callable
from email import policy
from email.message import EmailMessage, Message
from email.parser import BytesParser

from ingestion_pipeline.errors import printable

from .document import DraftSection, assemble
from .errors import ProcessingError
from .formats import EML
from .html import parse_html
from .model import ParsedDocument
from .plain import parse_plain

MAX_ATTACHMENTS = 100
_NAMED_IN_NOTE = 20  # attachments past the limit named in the note, at most
_SIGNATURES = {"application/pgp-signature", "application/pkcs7-signature", "application/x-pkcs7-signature"}
_HEADERS = ("From", "To", "Cc", "Date")

AttachmentParser = Callable[[bytes, str], ParsedDocument]


def parse_eml(content: bytes, parse_attachment: AttachmentParser) -> ParsedDocument:
    message = BytesParser(policy=policy.default).parsebytes(content)
    if not isinstance(message, EmailMessage):
        raise ValueError("not an e-mail message")
    subject = " ".join(str(message.get("Subject", "")).split()) or None
    body = _body(message)
    header = "\n".join(f"{name}: {' '.join(str(message[name]).split())}" for name in _HEADERS if message[name])
    first = body.sections[0] if body.sections else None
    opening = [part for part in (subject, header, first.text if first and first.heading is None else "") if part]
    drafts = [DraftSection(subject, 1, 0, "\n\n".join(opening))]
    drafts += [
        DraftSection(s.heading, min(s.level + 1, 6) if subject else s.level, 0, s.text)
        for s in body.sections
        if not (s is first and s.heading is None)
    ]
    pages = ["\n\n".join(d.text for d in drafts)]
    notes = _attachments(message, parse_attachment, pages, drafts)
    return assemble(EML, pages, drafts, title=subject, notes=notes)


def _body(message: EmailMessage) -> ParsedDocument:
    part = message.get_body(preferencelist=("html", "plain"))
    if part is None:
        return ParsedDocument(title=None, mime_type=EML, pages=[], sections=[])
    text = _text_content(part)
    return parse_html(text) if part.get_content_subtype() == "html" else parse_plain(text)


def _text_content(part: Message) -> str:
    try:
        return str(part.get_content())  # type: ignore[attr-defined]
    except (LookupError, ValueError):  # an unknown or lying charset: keep what decodes
        payload = part.get_payload(decode=True)
        return payload.decode("utf-8", "replace") if isinstance(payload, bytes) else ""


def _attachments(
    message: EmailMessage, parse_attachment: AttachmentParser, pages: list[str], drafts: list[DraftSection]
) -> list[str]:
    """Append each attachment's pages and sections; the notes on what was not indexed."""
    notes: list[str] = []
    parts = [part for part in message.iter_attachments() if part.get_content_type() not in _SIGNATURES]
    for number, part in enumerate(parts[:MAX_ATTACHMENTS], 1):
        name = part.get_filename() or f"attachment {number}"
        try:
            attached = parse_attachment(_attachment_bytes(part), name)
        except ProcessingError as exc:
            notes.append(printable(f"attachment {name} not indexed: {exc}"))
            continue
        _append(attached, name, pages, drafts)
        notes.extend(f"attachment {name}: {note}" for note in attached.notes)
    skipped = parts[MAX_ATTACHMENTS:]
    if skipped:
        names = ", ".join(part.get_filename() or "(unnamed)" for part in skipped[:_NAMED_IN_NOTE])
        more = f" and {len(skipped) - _NAMED_IN_NOTE:,} more" if len(skipped) > _NAMED_IN_NOTE else ""
        notes.append(
            f"{len(skipped):,} attachments not indexed: over the limit of {MAX_ATTACHMENTS} per message ({names}{more})"
        )
    return notes


def _attachment_bytes(part: EmailMessage) -> bytes:
    if part.get_content_type() == "message/rfc822":
        attached = part.get_payload(0)
        return attached.as_bytes() if isinstance(attached, Message) else b""
    payload = part.get_payload(decode=True)
    return payload if isinstance(payload, bytes) else b""


def _append(attached: ParsedDocument, name: str, pages: list[str], drafts: list[DraftSection]) -> None:
    """The attachment's pages after the message's, its sections under its own heading."""
    offset = len(pages)
    pages.extend(page.text for page in attached.pages)
    heading = f"Attachment: {name}"
    drafts.append(DraftSection(heading, 1, offset, heading))
    for section in attached.sections:
        page = None if section.page_ordinal is None else offset + section.page_ordinal
        drafts.append(DraftSection(section.heading, min(section.level + 1, 6), page, section.text))
