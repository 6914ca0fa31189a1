"""`ingest search` through a resident process of the user (issue 60: the model read once).

A search in a process of its own spends ~0.8 s before its first statement: importing psycopg,
pydantic and numpy and reading the embedder's model. So `ingest search` first asks a resident
process (search_server.py), which has all of that loaded, to run the search: this module
imports the standard library only (tests/unit/test_search_server.py checks), sends the
arguments over a Unix socket and prints what comes back: the same bytes on the same streams,
and the same exit status, as the search run here prints (the resident process runs the same
`execute`, its stdout and stderr recorded in the order written).

When nothing answers (the first search, or after the resident process left), the search runs
in this process as before, and then a resident process is started, detached, for the next ones.
Anything unexpected on the way (a reply cut short, a process that left mid-request, an
exception in it) also runs the search here: a search is read-only, so running it again is safe.

One resident process per *key*: everything that decides the answer apart from the database's
rows (the settings' and libpq's environment variables, the working folder and its `.env`, the
interpreter, the package's files and version, the installed packages). A different key is
another process; one whose inputs change (an edited or upgraded package) leaves by itself.

The socket, its lock, status and log files live in a folder only the user may enter (0700:
$XDG_RUNTIME_DIR/ingestion-pipeline, else ingestion-pipeline-UID in the temporary folder); a
folder that is not the user's own and private is not used (the search runs here). The resident
process holds, between searches, its open files and the lock of its key only: no database
connection (it opens one per search, so a server restarted in between is no concern, and
migrations, `ingest db stop` and dropped databases never wait for it).

Off: INGEST_SEARCH_SERVER=off in the environment, or `ingest search --no-server`; neither asks
nor starts a resident process. Unix sockets' peer credentials (SO_PEERCRED) are Linux's: on
other systems every search runs in its own process."""

from __future__ import annotations

import json
import os
import socket
import stat
import sys
from pathlib import Path

SETTING = "INGEST_SEARCH_SERVER"
EXIT_INTERRUPTED = 130
CONNECT_TIMEOUT_SECONDS = 2.0
MAX_SOCKET_PATH = 100  # sun_path holds 108 bytes on Linux

# Environment variables that decide a search's answer, by prefix and by name (upper case, as
# the settings read them): the settings (INGEST_*, DATABASE_URL, OPENAI_API_KEY), libpq's
# (PG*, HOME for ~/.pgpass), platformdirs' (XDG_*, HOME), Python's, the embedders' libraries'
# and an HTTP client's (proxies, certificates), the locale and the time zone.
KEYED_PREFIXES = ("INGEST_", "PG", "OPENAI_", "XDG_", "PYTHON", "HF_", "SSL_", "LC_")
KEYED_NAMES = frozenset(
    {
        "DATABASE_URL",
        "HOME",
        "USER",
        "LOGNAME",
        "TMPDIR",
        "TZ",
        "LANG",
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "NO_PROXY",
        "ALL_PROXY",
        "REQUESTS_CA_BUNDLE",
        "CURL_CA_BUNDLE",
    }
)


def search_command(argv: list[str]) -> int:
    """`ingest search ARGV[1:]`: answered by the resident process when one answers, else run
    here, after which a resident process is started for the next search."""
    from ingestion_pipeline.cli import run_command

    resident = Resident.for_search(argv)
    if resident is not None:
        try:
            reply = resident.ask(argv)
        except KeyboardInterrupt:
            print("ingest: interrupted", file=sys.stderr)
            return EXIT_INTERRUPTED
        if reply is not None:
            return replay(reply)
    code = run_command(argv)
    if resident is not None:
        resident.start()
    return code


def replay(reply: dict[str, object]) -> int:
    """Write what the resident process's search wrote, in order, to this process's streams."""
    from ingestion_pipeline.cli import EXIT_BROKEN_PIPE

    try:
        for stream, text in reply["output"]:  # type: ignore[attr-defined]
            (sys.stdout if stream == 1 else sys.stderr).write(text)
        sys.stdout.flush()
    except BrokenPipeError:  # as `ingest` does in-process (cli/__init__.py)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    code = reply["code"]
    return code if isinstance(code, int) else 1


def opted_out(argv: list[str]) -> bool:
    """INGEST_SEARCH_SERVER=off, `--no-server` (or an abbreviation argparse takes for it), or
    a help request (answered here: not worth a process)."""
    if any(name.upper() == SETTING and value.strip().lower() == "off" for name, value in os.environ.items()):
        return True
    return any(arg in ("-h", "--help") or (arg.startswith("--no") and "--no-server".startswith(arg)) for arg in argv)


class Resident:
    """The resident process of the caller's key: its socket and files in the runtime folder."""

    def __init__(self, folder: Path, name: str) -> None:
        self.folder = folder
        self.name = name

    @classmethod
    def for_search(cls, argv: list[str]) -> Resident | None:
        """None when this search asks none: opted out, no peer credentials, no private folder."""
        if opted_out(argv) or not hasattr(socket, "SO_PEERCRED"):
            return None
        folder = runtime_folder()
        resident = cls(folder, f"search-{key()[:24]}") if folder is not None else None
        if resident is None or len(str(resident.socket_path)) > MAX_SOCKET_PATH:
            return None
        return resident

    @property
    def socket_path(self) -> Path:
        return self.folder / f"{self.name}.sock"

    @property
    def lock_path(self) -> Path:
        return self.folder / f"{self.name}.lock"

    @property
    def status_path(self) -> Path:
        return self.folder / f"{self.name}.json"

    @property
    def log_path(self) -> Path:
        return self.folder / f"{self.name}.log"

    def ask(self, argv: list[str]) -> dict[str, object] | None:
        """The resident process's reply to the search; None when none answered it (no socket,
        a stale one, a reply cut short, or one that says to run it here)."""
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(CONNECT_TIMEOUT_SECONDS)
            try:
                sock.connect(str(self.socket_path))
                if peer_uid(sock) != os.getuid():  # only a process of this user answers
                    return None
                sock.settimeout(None)  # a search takes as long as it takes, as it would here
                request = {"argv": argv, "columns": terminal_columns()}  # argparse wraps its usage to it
                sock.sendall(json.dumps(request).encode() + b"\n")
                sock.shutdown(socket.SHUT_WR)
                data = b"".join(iter(lambda: sock.recv(1 << 16), b""))
                reply = json.loads(data)
            except (OSError, ValueError):
                return None
        if not isinstance(reply, dict) or not isinstance(reply.get("output"), list) or "code" not in reply:
            return None  # {"fallback": why}: run here
        return reply

    def start(self) -> None:
        """Start the resident process of this key, detached, unless one runs or is starting:
        the starter takes the key's lock (flock) and hands it to the process, which holds it
        while it lives. Never raises: the search is done whatever happens here."""
        import fcntl
        import subprocess

        try:
            lock = os.open(self.lock_path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except OSError:
            return
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            log = os.open(self.log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
            try:
                # -P: the package this interpreter installed, not a folder of that name in the working one
                server = ["-P", "-m", "ingestion_pipeline.cli.search_server", str(self.folder), self.name, str(lock)]
                subprocess.Popen(  # noqa: S603 (this interpreter, fixed arguments, no shell)
                    [sys.executable, *server],
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=log,
                    pass_fds=(lock,),
                    start_new_session=True,  # not in the terminal's process group: no ^C, no hangup
                )
            finally:
                os.close(log)
        except OSError:  # the lock is taken (BlockingIOError), or the process could not start
            pass
        finally:
            os.close(lock)


def terminal_columns() -> int:
    """What `shutil.get_terminal_size().columns` answers, without importing shutil (which
    imports bz2 and lzma: milliseconds of a search that takes ~0.1 s)."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    stdout = sys.__stdout__
    if columns <= 0 and stdout is not None:
        try:
            columns = os.get_terminal_size(stdout.fileno()).columns
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns if columns > 0 else 80


def peer_uid(sock: socket.socket) -> int:
    """The user id of the process at the other end of a Unix socket (Linux)."""
    import struct

    credentials = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _, uid, _ = struct.unpack("3i", credentials)
    return int(uid)


def runtime_folder() -> Path | None:
    """The user's private folder for the resident processes, made if missing; None when it is
    not a folder (a link, a file) owned by this user that no one else may enter."""
    uid = os.getuid()
    base = os.environ.get("XDG_RUNTIME_DIR", "")
    if base and private(base, uid):
        folder = os.path.join(base, "ingestion-pipeline")
    else:
        folder = os.path.join(os.environ.get("TMPDIR") or "/tmp", f"ingestion-pipeline-{uid}")  # noqa: S108
    try:
        os.mkdir(folder, 0o700)
    except FileExistsError:
        pass
    except OSError:
        return None
    return Path(folder) if private(folder, uid) else None


def private(path: str, uid: int) -> bool:
    try:
        info = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(info.st_mode) and info.st_uid == uid and info.st_mode & 0o077 == 0


def key() -> str:
    """What decides a search's answer apart from the database's rows, hashed (module doc)."""
    import hashlib
    import site

    from ingestion_pipeline import __version__

    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = sorted((name, value) for name, value in os.environ.items() if keyed(name))
    static_model = os.environ.get("INGEST_STATIC_MODEL_PATH")
    inputs = {
        "uid": os.getuid(),
        "env": env,
        "cwd": os.getcwd(),
        "dotenv": digest(".env"),  # the settings read ./.env
        "python": [sys.executable, sys.version],
        "package": [package, __version__, newest_change(package, (".py", ".sql"))],
        "installed": [installed(path) for path in site.getsitepackages()],  # changes on (un)install
        "static_model": newest_change(static_model, None) if static_model else None,
    }
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()


def keyed(name: str) -> bool:
    upper = name.upper()
    return upper in KEYED_NAMES or upper.startswith(KEYED_PREFIXES)


def digest(path: str) -> str | None:
    import hashlib

    try:
        with open(path, "rb") as handle:
            return hashlib.sha256(handle.read()).hexdigest()
    except OSError:
        return None


def mtime(path: str) -> int | None:
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return None


def newest_change(root: str, suffixes: tuple[str, ...] | None) -> tuple[int, int]:
    """The newest modification time under `root` of the files with these suffixes (None: every
    file), and a hash of their names (a file added or removed). Not the folders' times: a
    `__pycache__` written by the first import of a fresh install changes those, and with them
    the key, between a search and the process it starts (which then left at once)."""
    newest, names = 0, []
    for folder, folders, files in os.walk(root):
        folders[:] = [name for name in folders if name != "__pycache__"]
        for name in files:
            if suffixes is None or name.endswith(suffixes):
                names.append(os.path.join(folder, name))
                newest = max(newest, mtime(names[-1]) or 0)
    return newest, hash_of(sorted(names))


def installed(site_packages: str) -> int:
    """The distributions installed there, by name and version (their .dist-info folders); not
    the folder's time, which bytecode written there changes."""
    try:
        return hash_of(sorted(name for name in os.listdir(site_packages) if name.endswith(".dist-info")))
    except OSError:
        return 0


def hash_of(names: list[str]) -> int:
    import zlib

    return zlib.crc32("\n".join(names).encode())
