"""Arguments and parsing shared by the commands: the graph options of partition, place and
sample, and the argparse ``type=`` checks every command's options use.

The checks run while the command line is parsed, so a bad number or path is refused before
any work starts (no result is lost to an output path that turns out to be a file). They are
:mod:`workbench.validate`'s: a value that fails one is kept as :class:`Refused`, and the
command's handler, wrapped by :func:`set_handler`, raises its :class:`ConfigError` naming the
option before it does anything: one line, exit status 2, as every user error. Numbers are
never coerced: ``1.5`` is not an integer, ``nan`` and ``inf`` are not quantities, an integer
must fit an int64.
"""

from __future__ import annotations

import argparse
import contextlib
import re
import sys
import tomllib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from workbench import validate
from workbench.errors import ConfigError

# argparse takes a value such as ``-1%``, ``-4GiB`` or ``-inf`` for an option name ("expected
# one argument"); with this matcher it reads any value that starts like a negative number as a
# value, so ``--capacity -1%`` and ``--capacity=-1%`` get the same message from the command.
NEGATIVE_VALUE = re.compile(r"^-(\.?\d|inf|nan)", re.IGNORECASE)


class ExamplesHelpFormatter(argparse.HelpFormatter):
    """argparse's formatter, but an example line (``$ gnnwb ...``) is kept on its own line as
    written, so it can be copied, and the test of every help's examples can find and run it."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        paragraphs: list[str] = []
        for line in text.splitlines() or [""]:
            if line.lstrip().startswith(("$ gnnwb ", "gnnwb ")) or not line.strip():
                paragraphs.append(indent + line)
            else:
                paragraphs.append(super()._fill_text(line, width, indent))
        return "\n".join(paragraphs)


def examples(*lines: str) -> dict[str, Any]:
    """``add_parser`` keywords that end a command's help with these example command lines."""
    return {
        "epilog": "examples:\n" + "\n".join(f"  $ {line}" for line in lines),
        "formatter_class": ExamplesHelpFormatter,
    }


def accept_negative_values(parser: argparse.ArgumentParser) -> None:
    """Let ``parser`` take option values that start like a negative number (``-1%``, ``-1e3``, ``-inf``)."""
    parser._negative_number_matcher = NEGATIVE_VALUE  # argparse has no public switch for this


# Stands for the option's name in a refusal; filled in by set_handler, which knows the option.
OPTION = "{option}"


@dataclass(frozen=True)
class Refused:
    """A value that failed its check; ``message`` names the option as :data:`OPTION`."""

    message: str


def checked_arg(check: Callable[[str], Any]) -> Callable[[str], Any]:
    """An argparse ``type=``: the checked value, or :class:`Refused` with the check's message
    (argparse would print its usage and raise SystemExit; a command's error is one line)."""

    def parse(text: str) -> Any:
        try:
            return check(text)
        except ConfigError as exc:
            message = str(exc)
            return Refused(message if OPTION in message else f"{OPTION} {message}")

    parse.__name__ = getattr(check, "__name__", "value")
    return parse


@contextlib.contextmanager
def _as_written(text: str) -> Iterator[None]:
    """A validator's error quoting the value as the user typed it (``1e999``, not ``inf``)."""
    try:
        yield
    except ConfigError as exc:
        rule = str(exc).rsplit(", got ", 1)[0]
        raise ConfigError(f"{rule}, got {text!r}") from None


def integer_arg(*, minimum: int | None = None, maximum: int = validate.INT64_MAX) -> Callable[[str], int]:
    """An integer written in decimal, within ``[minimum, maximum]`` (an int64 by default)."""

    def integer(text: str) -> int:
        try:
            value = int(text.strip(), 10)
        except ValueError:
            raise ConfigError(f"{OPTION}: expected an integer, got {text!r}") from None
        with _as_written(text):
            return validate.integer(value, OPTION, minimum=minimum, maximum=maximum)

    return checked_arg(integer)


def seed_arg() -> Callable[[str], int]:
    """A random seed: 0 to the largest int64 (numpy refuses negative seeds)."""
    return integer_arg(minimum=0)


def number_arg(
    *, minimum: float | None = None, maximum: float | None = None, positive: bool = False
) -> Callable[[str], float]:
    """A finite number within the bounds (``nan``, ``inf`` and ``1e999`` are refused)."""

    def number(text: str) -> float:
        try:
            value = float(text.strip())
        except ValueError:
            raise ConfigError(f"{OPTION}: expected a number, got {text!r}") from None
        with _as_written(text):
            value = validate.finite_number(value, OPTION, minimum=minimum, positive=positive)
        if maximum is not None and value > maximum:
            raise ConfigError(f"{OPTION} must be at most {maximum:g}, got {text!r}")
        return value

    return checked_arg(number)


def port_arg() -> Callable[[str], int]:
    """A TCP port: 0 (any free one) to 65535."""
    return integer_arg(minimum=0, maximum=validate.MAX_PORT)


def existing_file_arg(what: str) -> Callable[[str], str]:
    """A path that is a readable file (not a folder, not missing)."""
    return checked_arg(lambda text: str(validate.existing_file(_nonempty_path(text, what), what)))


def existing_folder_arg(what: str) -> Callable[[str], str]:
    """A path that is a folder (not a file, not missing)."""
    return checked_arg(lambda text: str(validate.existing_folder(_nonempty_path(text, what), what)))


def existing_path_arg(what: str) -> Callable[[str], str]:
    """A path that exists: a file or a folder (a folder stands for the files in it)."""

    def existing_path(text: str) -> str:
        _nonempty_path(text, what)
        if not Path(text).exists():
            raise ConfigError(f"{text}: no such {what}")
        return text

    return checked_arg(existing_path)


def writable_file_arg(what: str) -> Callable[[str], str]:
    """A path where a file can be written: not a folder, under a writable folder."""
    return checked_arg(lambda text: str(validate.writable_file(_nonempty_path(text, what), what)))


def writable_folder_arg(what: str) -> Callable[[str], str]:
    """A path that is, or can be made, a writable folder (not a file)."""
    return checked_arg(lambda text: str(validate.writable_folder(_nonempty_path(text, what), what)))


def nonempty_arg(what: str) -> Callable[[str], str]:
    """A string with something in it: an empty one would silently mean the default."""
    return checked_arg(lambda text: validate.string(text, OPTION, nonempty=True))


def preset_or_file_arg(what: str) -> Callable[[str], str]:
    """A preset name or a path: a name that is a folder is refused here, since no preset is
    named like one; a missing name is left to the loader, which knows the presets."""

    def preset_or_file(text: str) -> str:
        _nonempty_path(text, what)
        if Path(text).is_dir():
            raise ConfigError(f"{text}: is a folder, expected a preset name or a {what}")
        return text

    return checked_arg(preset_or_file)


def _nonempty_path(text: str, what: str) -> str:
    if not text.strip():
        raise ConfigError(f"{OPTION}: empty path, expected a {what}")
    return text


def add_out_argument(
    p: argparse.ArgumentParser | Any,
    what: str,
    *,
    kind: str = "file",
    metavar: str | None = None,
    default: str | None = None,
    required: bool = False,
    help: str,
) -> None:
    """``-o``/``--out``, the one name of every command's output path, checked for kind and
    writability as it is parsed; ``--output``, its former spelling in some commands, still
    works but is not shown."""
    check = writable_folder_arg(what) if kind == "folder" else writable_file_arg(what)
    group = p.add_mutually_exclusive_group(required=required)
    group.add_argument("-o", "--out", type=check, metavar=metavar, default=default, help=help)
    group.add_argument("--output", dest="out", type=check, default=default, help=argparse.SUPPRESS)


if TYPE_CHECKING:
    from workbench.graph.csr import CSRGraph


# Local worker processes: more than this is a typo, not a machine.
MAX_JOBS = 1024

# GNN layers: deeper than this is a typo (and a full-neighborhood sampler would never end).
MAX_LAYERS = 64
# Minibatches or epochs a command samples in one go: more is hours of work, not a measurement.
MAX_BATCHES = 100_000
MAX_EPOCHS = 1_000

# A fanout or layer size is a count of vertices: beyond an int32 no sampler can hold one.
MAX_LAYER_SIZE = 2**31 - 1


def add_graph_arguments(p: argparse.ArgumentParser) -> None:
    """``--graph``, ``--scale`` and ``--graph-seed``: which graph to load, as ``load_graph`` reads them."""
    p.add_argument(
        "--graph",
        required=True,
        type=nonempty_arg("graph"),
        help="dataset preset, ad-hoc spec (er:n=1000,deg=8) or graph file",
    )
    p.add_argument(
        "--scale",
        type=number_arg(positive=True),
        default=None,
        help="preset size factor (default: the preset's)",
    )
    p.add_argument("--graph-seed", type=seed_arg(), default=0, help="graph generator seed (default 0)")


def check_at_most_vertices(flag: str, value: int, graph: CSRGraph) -> None:
    """Parts or GPUs beyond the graph's vertex count leave some with nothing: refused, naming ``flag``."""
    if value > graph.num_nodes:
        raise ConfigError(f"{flag} {value} exceeds the graph's {graph.num_nodes:,} vertices")


def load_graph(args: argparse.Namespace) -> CSRGraph:
    """The graph named by :func:`add_graph_arguments`' options; generation progress goes to stderr."""
    from workbench.graph.datasets import load_dataset

    def say(message: str) -> None:
        print(message, file=sys.stderr)

    return load_dataset(args.graph, scale=args.scale, seed=args.graph_seed, progress=say)


def parse_params(pairs: list[str]) -> dict[str, Any]:
    """``key=value`` pairs; values read as TOML (numbers, booleans, quoted strings, lists), else plain strings."""
    params: dict[str, Any] = {}
    for pair in pairs:
        key, sep, text = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError(f"--param {pair!r}: expected KEY=VALUE")
        try:
            params[key] = tomllib.loads(f"v = {text}")["v"]
        except tomllib.TOMLDecodeError:
            params[key] = text
    return params


def parse_layer_sizes(text: str, flag: str) -> list[int]:
    """Per-layer positive integers written ``15,10,5`` (fanouts, layer sizes), input layer first."""
    entries = [x.strip() for x in text.split(",")]
    if not text.strip() or "" in entries:  # "15,,5" is a typo, not two layers
        raise ConfigError(f"{flag} {text!r}: expected integers like 15,10,5, with no empty entry")
    try:
        sizes = [int(x, 10) for x in entries]
    except ValueError:
        raise ConfigError(f"{flag} {text!r}: expected integers like 15,10,5") from None
    if any(size < 1 for size in sizes):
        raise ConfigError(f"{flag} {text!r}: need at least one layer, all >= 1")
    for size in sizes:
        validate.integer(size, f"{flag} {text!r}: each entry", maximum=MAX_LAYER_SIZE)
    return sizes


def set_handler(parser: argparse.ArgumentParser, handler: Callable[[argparse.Namespace], int]) -> None:
    """``handler`` runs the command, after a value refused while parsing (:class:`Refused`) is
    raised as a :class:`ConfigError` naming its option."""
    names: dict[str, str] = {}
    for action in parser._actions:
        if action.help is not argparse.SUPPRESS or action.dest not in names:
            shown = max(action.option_strings, key=len) if action.option_strings else action.metavar
            names.setdefault(action.dest, str(shown or action.dest))

    def run(args: argparse.Namespace) -> int:
        message = refusal(args, names)
        if message is not None:
            raise ConfigError(message)
        return handler(args)

    parser.set_defaults(handler=run, option_names=names)


def refusal(args: argparse.Namespace, names: dict[str, str] | None = None) -> str | None:
    """The message of the first refused value in ``args`` with its option named, or None."""
    names = names if names is not None else getattr(args, "option_names", {})
    for dest, value in vars(args).items():
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, Refused):
                return item.message.replace(OPTION, names.get(dest, dest))
    return None
