"""What the commands share: the database URL option, argument types, JSON output."""

from __future__ import annotations

import argparse
import json


def positive_int(value: str) -> int:
    """argparse type: reports a bad value as a usage error, not a traceback."""
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {value!r}") from None
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {number}")
    return number


def add_database_url(parser) -> None:
    parser.add_argument("--database-url", metavar="URL", help="overrides DATABASE_URL")


def print_json(data) -> None:
    print(json.dumps(data, indent=2, default=str))
