"""Every shell script that runs on a box, as a real `.sh` file shipped with the package.

A script is loaded by name and run with its parameters as positional arguments: the command
is `set -- <quoted words>` followed by the script's text, so no user value is ever
interpolated into the script itself. shellcheck runs over these files in CI.
"""

from __future__ import annotations

import functools
import importlib.resources
import re

from mcp_server.hosts.commands import quote

_SCRIPT_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


@functools.cache
def load(name: str) -> str:
    """The text of `scripts/<name>.sh`."""
    if not _SCRIPT_NAME.match(name):
        raise ValueError(f"not a script name: {name!r}")
    return importlib.resources.files(__name__).joinpath(f"{name}.sh").read_text(encoding="utf-8")


def command(name: str, *args: str) -> str:
    """Run script `name` with literal arguments `args` (each quoted here)."""
    return command_words(name, *(quote(a) for a in args))


def command_words(name: str, *words: str) -> str:
    """Run script `name` with arguments that are already shell words: quoted by
    `hosts.commands.quote`, or a box path from `hosts.commands.path_word` (which expands
    `~/` to the remote $HOME). Never pass an unquoted user value here."""
    prefix = "set -- " + " ".join(words) + "\n" if words else "set --\n"
    return prefix + load(name)
