"""Worker ids: unique per claim loop and never reused, so a restarted process cannot
inherit a lease that an earlier incarnation held."""

import os
import socket
import uuid


def new_worker_id(label: str = "worker") -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{label}:{uuid.uuid4().hex[:12]}"
