"""Every shell script that runs on a box, as a real `.sh` file shipped with the package.

A script is loaded by name and run with its parameters as positional arguments: the command
is `set -- <quoted words>` followed by the script's text, so no user value is ever
interpolated into the script itself. shellcheck runs over these files in CI.

A box's shell reads a CR before a line's end as part of the command (`$'\r': command not found`),
and a git checkout on Windows with core.autocrlf gives every `.sh` CRLF line ends (.gitattributes
asks for LF; an older clone or a copied tree may not have it): a script is read as bytes and its
CRLF ends made LF before it goes anywhere. A CR anywhere else is a damaged file, refused.
"""

from __future__ import annotations

import functools
import importlib.resources
import logging
import re

from mcp_server.hosts.commands import quote

_SCRIPT_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
log = logging.getLogger(__name__)


def lf_only(text: str, what: str) -> str:
    """`text` with CRLF line ends made LF; a ValueError naming `what` for any other CR."""
    if "\r" not in text:
        return text
    fixed = text.replace("\r\n", "\n")
    if "\r" in fixed:
        raise ValueError(f"{what} holds a carriage return that ends no line: the installed file is damaged; "
                         "reinstall the package (in a git checkout: `git add --renormalize .` then check out again)")
    log.info("%s has CRLF line ends (a Windows checkout?): sent to the box with LF ends", what)
    return fixed


@functools.cache
def load(name: str) -> str:
    """The text of `scripts/<name>.sh`."""
    if not _SCRIPT_NAME.match(name):
        raise ValueError(f"not a script name: {name!r}")
    raw = importlib.resources.files(__name__).joinpath(f"{name}.sh").read_bytes()
    return lf_only(raw.decode("utf-8"), f"scripts/{name}.sh")


def command(name: str, *args: str) -> str:
    """Run script `name` with literal arguments `args` (each quoted here)."""
    return command_words(name, *(quote(a) for a in args))


def command_words(name: str, *words: str) -> str:
    """Run script `name` with arguments that are already shell words: quoted by
    `hosts.commands.quote`, or a box path from `hosts.commands.path_word` (which expands
    `~/` to the remote $HOME). Never pass an unquoted user value here."""
    prefix = "set -- " + " ".join(words) + "\n" if words else "set --\n"
    return prefix + load(name)
