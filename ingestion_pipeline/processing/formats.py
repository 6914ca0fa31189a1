"""MIME types whose parsers load their libraries only when a file of the type comes
(parse.py): named here, so that detecting a file's type imports none of those libraries."""

EML = "message/rfc822"
IMAGE_TYPES = {"image/png": "PNG", "image/jpeg": "JPEG", "image/tiff": "TIFF"}
