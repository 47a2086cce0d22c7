"""Refuse to run beside the other ``quarry``: the Minecraft protocol library.

Two distributions install the import name ``quarry``: this one (``pip install
quarry-index``) and an unrelated Minecraft protocol library that owns the name
``quarry`` on the Python Package Index. Installed into one environment, they
share the directory ``site-packages/quarry/`` and overwrite each other's
``quarry/__init__.py``, so ``import quarry`` would give a mixture of both. The
Minecraft library's files include ``quarry/net/protocol.py``, a path this
package never has; its presence beside our modules is the clash. One ``stat``,
so every ``import quarry`` and every command can afford it.

Importing this module runs the check. It is imported by ``quarry/__init__.py``
(the clash when ours was installed last) and by ``quarry/cli/__init__.py`` (when
the Minecraft library was installed last and its empty ``__init__.py`` replaced
ours).
"""

import os
import sys

_MINECRAFT_MARKER = os.path.join("net", "protocol.py")


class PackageClashError(ImportError):
    """The Minecraft library ``quarry`` is installed in the same package directory."""


def clash_message(package_dir: str) -> str | None:
    """What is wrong when ``package_dir`` holds the Minecraft library's files too.

    Parameters
    ----------
    package_dir : str
        The directory of the imported ``quarry`` package.

    Returns
    -------
    str or None
        The message naming both packages and what to do, or None when there is
        no clash.

    Examples
    --------
    >>> import os, tempfile
    >>> d = tempfile.mkdtemp()
    >>> clash_message(d) is None
    True
    >>> os.makedirs(os.path.join(d, "net"))
    >>> open(os.path.join(d, "net", "protocol.py"), "w").close()
    >>> print(clash_message(d))  # doctest: +ELLIPSIS
    two packages named 'quarry' are installed in .../quarry: ...
    """
    if not os.path.exists(os.path.join(package_dir, _MINECRAFT_MARKER)):
        return None
    site = os.path.dirname(package_dir)
    return (
        f"two packages named 'quarry' are installed in {os.path.join(site, 'quarry')}: "
        "Quarry, the array query tool (pip name 'quarry-index'), and the unrelated "
        "Minecraft protocol library (pip name 'quarry'). They cannot share an environment. "
        "Remove the Minecraft library and reinstall this one: "
        "pip uninstall quarry quarry-index && pip install quarry-index "
        "(or use a separate virtual environment for each)"
    )


def check(package_dir: str) -> None:
    """Fail loudly if the Minecraft library ``quarry`` shares ``package_dir``.

    From the ``quarry`` command this prints one line and exits 1, as every
    command error does; from Python it raises :class:`PackageClashError`.

    Parameters
    ----------
    package_dir : str
        The directory of the imported ``quarry`` package.

    Raises
    ------
    PackageClashError
        When both packages' files are in ``package_dir`` (not from the command).

    Examples
    --------
    >>> import os, quarry
    >>> check(os.path.dirname(quarry.__file__))  # no clash here: returns None
    """
    message = clash_message(package_dir)
    if message is None:
        return
    # The console script imports quarry before main() can catch anything, so the
    # command's one-line error is given here (argv[0] is the script's path).
    if os.path.basename(sys.argv[0]) == "quarry":
        sys.exit(f"quarry: {message}")
    raise PackageClashError(message)


check(os.path.dirname(os.path.abspath(__file__)))
