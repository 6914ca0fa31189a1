"""Running the converters: pandoc (one file per run) and LibreOffice headless (every input
of one target format in one run, with a private profile so parallel runs do not collide),
the record of a file they made, and the error when one fails or writes nothing.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

# The Debian packages that bring each tool (what to install when one is missing).
INSTALL = {
    "pandoc": "pandoc",
    "soffice": "libreoffice-writer-nogui libreoffice-calc-nogui libreoffice-impress-nogui",
    "tesseract": "tesseract-ocr",
}
# What build_corpus and make_scans run, and Tesseract, which reading their scans needs.
CORPUS_TOOLS = ("pandoc", "soffice", "tesseract")
SCAN_TOOLS = ("pandoc", "soffice", "tesseract")
_PANDOC_TIMEOUT = 60
_SOFFICE_TIMEOUT = 180


class ConversionError(RuntimeError):
    """A converter failed or wrote nothing; the message carries its output."""


@dataclass(frozen=True)
class ConvertedFile:
    path: Path
    format: str  # "docx", "odt", ..., "png", "pdf-scan"; "eml-attachment" for the EML's attachment
    phrase: str  # from the middle of the file: searching for it finds the file
    made_by: str  # "pandoc", "LibreOffice", "email", "csv", "pypdfium2+Pillow"
    source_text: str | None = None  # scans: the text the pages were rendered from


def missing_tools(tools: Iterable[str] = CORPUS_TOOLS) -> list[str]:
    """The tools not on PATH, each with the package to install: [] when all are found."""
    return [f"{tool} (apt-get install {INSTALL.get(tool, tool)})" for tool in tools if shutil.which(tool) is None]


def run_pandoc(markdown: str, target: Path, *, title: str | None = None) -> Path:
    """`markdown` converted by pandoc to `target`, in the format its suffix names."""
    command = [_tool("pandoc"), "--from", "markdown-smart", "--standalone"]
    if title:
        command += ["--metadata", f"title={title}"]
    _run([*command, "--output", str(target)], timeout=_PANDOC_TIMEOUT, stdin=markdown)
    if not target.is_file() or target.stat().st_size == 0:
        raise ConversionError(f"pandoc wrote no {target.name}")
    return target


def run_soffice(target_format: str, inputs: Sequence[Path], outdir: Path, *, infilter: str | None = None) -> list[Path]:
    """One LibreOffice run converting every input to `target_format`, in a private profile."""
    outdir.mkdir(parents=True, exist_ok=True)
    profile = Path(tempfile.mkdtemp(prefix="converted-soffice-"))
    try:
        command = [
            _tool("soffice"),
            f"-env:UserInstallation={profile.as_uri()}",
            "--headless",
            "--norestore",
            "--nolockcheck",
        ]
        if infilter:
            command.append(f"--infilter={infilter}")
        command += ["--convert-to", target_format, "--outdir", str(outdir), *map(str, inputs)]
        output = _run(command, timeout=_SOFFICE_TIMEOUT)
    finally:
        shutil.rmtree(profile, ignore_errors=True)
    made = [outdir / f"{path.stem}.{target_format}" for path in inputs]
    absent = [path.name for path in made if not path.is_file() or path.stat().st_size == 0]
    if absent:
        raise ConversionError(f"soffice --convert-to {target_format} wrote no {', '.join(absent)}: {output}")
    return made


def in_parallel(tasks: Sequence[Callable[[], object]]) -> None:
    """Run every task, each in its own thread; the first failure is raised."""
    with ThreadPoolExecutor(max_workers=max(1, len(tasks))) as pool:
        for future in [pool.submit(task) for task in tasks]:
            future.result()


def deferred(function: Callable[..., Path], *args: object, **kwargs: object) -> Callable[[], Path]:
    """A task for in_parallel: `function` called with these arguments."""

    def call() -> Path:
        return function(*args, **kwargs)

    return call


def _run(command: list[str], *, timeout: int, stdin: str | None = None) -> str:
    try:
        done = subprocess.run(  # noqa: S603 - a fixed argument list, no shell
            command, input=stdin, capture_output=True, text=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired as exc:
        raise ConversionError(f"{command[0]} ran over {timeout} s: {' '.join(command)}") from exc
    output = (done.stdout + done.stderr).strip()
    if done.returncode != 0:
        raise ConversionError(f"{' '.join(command)} exited with {done.returncode}: {output}")
    return output


def _tool(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        raise ConversionError(f"{name} is not installed (apt-get install {INSTALL.get(name, name)})")
    return found
