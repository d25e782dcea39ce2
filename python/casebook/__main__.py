"""``python -m casebook …`` runs the ``casebook`` command this package installed, as ``casebook …``
would: for when the environment's scripts folder is not on ``PATH`` (``pip install --user``, a
virtual environment not activated). Arguments, output and exit status pass through."""

from __future__ import annotations

import os
import subprocess
import sys

from . import _backend
from .errors import Error


def main() -> int:
    try:
        command = _backend.binary()
    except Error as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    arguments = [command, *sys.argv[1:]]
    if os.name == "posix":
        # The command takes this process's place: signals and the terminal are its own.
        os.execv(command, arguments)
    return subprocess.call(arguments)


if __name__ == "__main__":
    sys.exit(main())
