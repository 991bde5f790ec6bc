"""Turns a Python file into an Operon component: ``python3 sdk/python/operon_build.py FILE.py``.

The file defines one ``@hook`` class or one ``@operation`` function; the build finds
which (or takes ``--world``), writes a small entry module that imports the file and
exports the SDK's adapter for that world, and runs componentize-py on it with the WIT
contract. componentize-py bundles the Python interpreter and pre-initialises the
module, so the component starts with the file already imported.

Usage::

    sdk/python/build.sh pod_labeler.py -o pod_labeler.wasm     # or: python3 sdk/python/operon_build.py ...

Needs ``componentize-py`` (``pip install componentize-py``, the version pinned in
``sdk/python/pyproject.toml``). The WIT contract is found beside the SDK in the Operon
repository (``wit/``), or given with ``--wit``.
"""

from __future__ import annotations

import argparse
import ast
import subprocess
import sys
import tempfile
from pathlib import Path

WORLDS = ("hook", "operation")
"""The worlds of the contract, named as the decorator that selects each."""

ENTRY = "_operon_main"
"""The entry module's name, which must differ from the world names."""

_SDK_ROOT = Path(__file__).resolve().parent
"""``sdk/python``: the directory holding the ``operon_sdk`` package."""


def detect_world(source: str, filename: str = "<guest>") -> str:
    """The world a guest's source selects: ``hook`` for an ``@hook`` class,
    ``operation`` for an ``@operation`` function (``@operon_sdk.hook`` works too).

    >>> detect_world("@hook\\nclass H(Hook): pass")
    'hook'
    """
    found: set[str] = set()
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)):
            for decorator in node.decorator_list:
                name = getattr(decorator, "id", None) or getattr(decorator, "attr", None)
                if isinstance(name, str) and name in WORLDS:
                    found.add(name)
    if len(found) != 1:
        what = "neither" if not found else "both"
        raise SystemExit(
            f"{filename}: uses {what} of @hook and @operation; pass --world hook|operation"
        )
    return found.pop()


def default_wit() -> Path:
    """The repository's ``wit/`` when the SDK runs from its checkout."""
    return _SDK_ROOT.parent.parent / "wit"


def build(
    guest: Path, output: Path, world: str | None = None, wit: Path | None = None
) -> None:
    """Builds ``guest`` into the component ``output``."""
    guest = guest.resolve()
    module = guest.stem
    if not module.isidentifier() or guest.suffix != ".py":
        raise SystemExit(f"{guest}: the guest must be a .py file named like a module")
    if module in WORLDS or module == ENTRY:
        raise SystemExit(f"{guest}: rename the file, `{module}` clashes with generated code")
    world = world or detect_world(guest.read_text(), str(guest))
    wit = wit or default_wit()
    if not wit.is_dir():
        raise SystemExit(f"no WIT contract at {wit}; pass --wit DIR")
    adapter = "HookWorld" if world == "hook" else "OperationWorld"
    with tempfile.TemporaryDirectory(prefix="operon-build-") as tmp:
        entry = Path(tmp) / f"{ENTRY}.py"
        entry.write_text(
            f"import {module}  # noqa: F401  (registers the {world})\n"
            f"from operon_sdk._export import {adapter} as WitWorld  # noqa: F401\n"
        )
        # The guest's own directory comes first so that its imports win; the SDK after it.
        command = [
            sys.executable,
            "-c",
            "import sys, componentize_py; sys.argv[0] = 'componentize-py'; "
            "componentize_py.script()",
            "--quiet",
            "-d",
            str(wit),
            "-w",
            world,
            "componentize",
            "-p",
            tmp,
            "-p",
            str(guest.parent),
            "-p",
            str(_SDK_ROOT),
            ENTRY,
            "-o",
            str(output),
        ]
        result = subprocess.run(command, check=False)
    if result.returncode != 0:
        raise SystemExit(f"componentize-py failed for {guest} (exit {result.returncode})")


def main(argv: list[str] | None = None) -> None:
    """The command line: ``operon_build.py FILE.py [-o OUT] [--world W] [--wit DIR]``."""
    parser = argparse.ArgumentParser(
        prog="operon_build.py", description="Build a Python guest into a component."
    )
    parser.add_argument("guest", type=Path, help="the .py file with an @hook or @operation")
    parser.add_argument(
        "-o", "--output", type=Path, help="the component to write (default: FILE.wasm)"
    )
    parser.add_argument("--world", choices=WORLDS, help="override the detected world")
    parser.add_argument("--wit", type=Path, help="the WIT contract directory")
    args = parser.parse_args(argv)
    output = args.output or args.guest.with_suffix(".wasm")
    build(args.guest, output, args.world, args.wit)
    print(f"built {output}")


if __name__ == "__main__":
    main()
