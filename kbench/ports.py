"""The ``--port`` of kbench's local servers (``kbench serve``, ``kbench label``, ``kbench ui``): one check of the
number before anything starts, and one line for each bind error a user can fix."""
from __future__ import annotations

import errno

PORT_RANGE = "give a port between 1 and 65535 (0: any free port)"


def port_problem(port: int) -> str | None:
    """The line refusing ``port`` (0 is any free port), or None when it is one."""
    return None if 0 <= port <= 65535 else f"--port {port}: {PORT_RANGE}"


def bind_fix(error: OSError, holder: str) -> str | None:
    """What to do about ``error`` from binding a port (``holder``: who may hold it, said when it is in use), or None
    for an error no setting fixes."""
    return {
        errno.EADDRINUSE: f"the port is in use ({holder}?); stop it or give another --port (0: any free port)",
        errno.EACCES: "binding that port needs privileges; give a port above 1023 (0: any free port)",
        errno.EADDRNOTAVAIL: "that address is not this machine's; give 127.0.0.1",
    }.get(error.errno)
