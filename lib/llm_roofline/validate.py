"""Checks of user input, shared by every entry point of the library and the command line.

Each function takes the name of the field (as the caller knows it: ``"batch"``,
``"config.json hidden_size"``), the value, and what is allowed; it returns the value in the
form the caller computes with, or raises ``ValueError`` with one line that names the field,
the value (shortened) and what is allowed. Nothing here guesses: a string ``"false"`` is not
a boolean, ``4+3j`` is not a batch size, ``5e-324`` is not a usable fraction of a peak.

Integers are Python or NumPy integers (``bool`` is refused). Arrays of integers (the
calculator's sweeps) may also hold whole floats such as ``32.0``, as NumPy makes them. Sizes
are bounded by :data:`MAX_COUNT` so that products of them stay exact in float64 and never
overflow int64; arrays by :data:`MAX_POINTS` and lists by :data:`MAX_ITEMS`.

Beyond single values: :func:`options` refuses an unknown keyword option (a typo is not
ignored), :func:`read_bytes` and :func:`read_json` read a file with a size cap that holds for
devices and pipes (at most ``cap + 1`` bytes) and strict JSON, :func:`allocation` refuses an
array larger than half the free memory before it is made, and :func:`unknown` is the one message
for a name not found (``unknown model 'x'; did you mean 'y'? known: ...``).

Numbers of any kind: a ``Decimal`` or a ``Fraction`` is read like the float it is
(:func:`is_number`, :func:`as_float`), wherever a real number is asked for.

Writers: every command that writes files (the student edition, the nbgrader course, the slides,
a fitted preset, a saved accelerator) goes through one gate: :func:`destination` refuses a bad
name, a destination that overlaps the writer's source and a file or special file where a folder
must be; :func:`replaceable` refuses to replace a file the writer did not write (its outputs
carry a marker) unless forced, and never replaces a folder, FIFO or device; :func:`write_output`
writes through a temporary file renamed into place. :func:`what_is` says what a path is (a
FIFO, a dangling link, a device) for the messages.
"""

from __future__ import annotations

import argparse
import decimal
import difflib
import fractions
import itertools
import json
import math
import numbers
import os
import re
import stat
import tempfile
from collections.abc import Iterable
from pathlib import Path

import numpy as np

__all__ = [
    "MAX_COUNT", "MAX_FILE_BYTES", "MAX_ITEMS", "MAX_POINTS", "NAME_MAX", "OneLineParser",
    "allocation", "as_float", "available_bytes", "axes", "boolean", "choice", "destination",
    "fraction", "integer", "integers", "is_number", "mapping", "marked", "names", "options",
    "path_name", "read_bytes", "read_json", "real", "reals", "replaceable", "sequence", "shorten",
    "source_folder",
    "text", "unknown", "what_is", "write_atomically", "write_output",
]

MAX_POINTS = 2**20
"""The most elements an array argument (a sweep) may hold: every kernel of a sweep makes arrays
of its size, so a larger one would exhaust memory before it is refused."""

MAX_COUNT = 2**40
"""The largest count (batch, tokens, GPUs) accepted: about 1.1e12. Products of three such
counts and a model dimension stay far below float64's 2**1023 and are exact up to 2**53
for every realistic input."""


def shorten(value, limit: int = 60) -> str:
    """``repr(value)`` on one line, cut to ``limit`` characters with an ellipsis and the full
    length (a multi-line repr, such as a 2-D array's, has its line breaks and indents folded)."""
    try:
        text = repr(value)
    except Exception:  # a repr that raises is still named by its type
        text = f"<{type(value).__name__}>"
    if "\n" in text or "\r" in text:
        text = " ".join(text.split())
    if len(text) <= limit:
        return text
    return f"{text[: limit - 1]}… ({len(text)} characters)"


def is_number(value) -> bool:
    """Whether ``value`` is a real number of any kind: a Python or NumPy int or float, a
    ``Fraction``, a ``Decimal`` (or another ``numbers.Real``); ``bool`` is not a number."""
    return (isinstance(value, numbers.Real | decimal.Decimal)
            and not isinstance(value, bool | np.bool_))


def as_float(value) -> float:
    """A number of any kind (:func:`is_number`) as a float: ``Decimal("1.5")`` and
    ``Fraction(3, 2)`` are 1.5; NaN for what is not a number or is not finite (an integer beyond
    float's range is infinite). Never raises."""
    if not is_number(value):
        return math.nan
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf
    except (TypeError, ValueError, ArithmeticError):  # a signalling Decimal NaN, a bad __float__
        return math.nan


def _plain(value):
    """A ``Decimal``/``Fraction`` scalar, or a list or tuple of numbers of any kind, in the
    float form NumPy computes with; anything else unchanged."""
    if isinstance(value, decimal.Decimal | fractions.Fraction):
        return as_float(value)
    if (isinstance(value, list | tuple) and value and len(value) <= MAX_POINTS
            and any(isinstance(v, decimal.Decimal | fractions.Fraction) for v in value)
            and all(is_number(v) for v in value)):
        return [as_float(v) for v in value]
    return value


def _unit(unit: str) -> str:
    return f" {unit}" if unit else ""


def _is_integer(value) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool | np.bool_)


def integer(name: str, value, *, minimum: int = 1, maximum: int = MAX_COUNT,
            unit: str = "") -> int:
    """A Python or NumPy integer in ``[minimum, maximum]``, as an ``int``. ``unit`` (what it
    counts: ``"tokens"``, ``"GPUs"``) follows the bounds in the message."""
    if not _is_integer(value) or not minimum <= value <= maximum:
        raise ValueError(
            f"{name} must be an integer from {minimum:,} to {maximum:,}{_unit(unit)}, "
            f"got {shorten(value)}"
        )
    return int(value)


def integers(name: str, value, *, minimum: int = 1, maximum: int = MAX_COUNT,
             unit: str = "") -> np.ndarray:
    """An integer or a non-empty array of whole numbers in ``[minimum, maximum]``, as int64
    (``unit`` as for ``integer``)."""
    what = (f"{name} must be an integer from {minimum:,} to {maximum:,}{_unit(unit)} (or an "
            "array of them)")
    if isinstance(value, str | bytes | bool | np.bool_) or value is None:
        raise ValueError(f"{what}, got {shorten(value)}")
    try:
        array = np.asarray(value)
    except Exception:
        raise ValueError(f"{what}, got {shorten(value)}") from None
    if array.size == 0:
        raise ValueError(f"{what}, got an empty array")
    if array.size > MAX_POINTS:
        raise ValueError(f"{name} may hold at most {MAX_POINTS:,} values, got {array.size:,}")
    kind = array.dtype.kind
    if kind not in "iuf":  # refuses bool, complex, strings, objects
        raise ValueError(f"{what}, got {shorten(value)}")
    if kind == "f":
        with np.errstate(invalid="ignore"):
            bad = ~(np.isfinite(array) & (array == np.floor(array)))
    else:
        bad = np.zeros(array.shape, dtype=bool)
    with np.errstate(invalid="ignore"):
        bad |= ~((array >= minimum) & (array <= maximum))
    if np.any(bad):
        raise ValueError(f"{what}, got {shorten(array[bad].flat[0].item())}")
    return array.astype(np.int64)


def real(name: str, value, *, minimum: float | None = None, maximum: float | None = None,
         open_min: bool = False, open_max: bool = False, unit: str = "") -> float:
    """A finite Python or NumPy real number within the bounds given, as a ``float``.

    ``open_min``/``open_max`` exclude the bound itself. ``unit`` is named in the message.
    """
    bounds = []
    if minimum is not None:
        bounds.append(f"{'>' if open_min else '>='} {minimum:g}")
    if maximum is not None:
        bounds.append(f"{'<' if open_max else '<='} {maximum:g}")
    what = f"{name} must be a finite number{' of ' + unit if unit else ''}"
    if bounds:
        what += f" {' and '.join(bounds)}"
    x = as_float(value)  # a Decimal or a Fraction is read like a float
    ok = math.isfinite(x)
    if ok and minimum is not None:
        ok = x > minimum if open_min else x >= minimum
    if ok and maximum is not None:
        ok = x < maximum if open_max else x <= maximum
    if not ok:
        raise ValueError(f"{what}, got {shorten(value)}")
    return x


def reals(name: str, value, *, minimum: float = 0.0, maximum: float = 1e300,
          unit: str = "") -> np.ndarray | float:
    """A finite real number, or a non-empty array of them, within ``[minimum, maximum]``: a
    ``float`` for a scalar, a float64 array otherwise (strings, booleans, ``None`` refused)."""
    what = (f"{name} must be a finite number{' of ' + unit if unit else ''} from {minimum:g} "
            f"to {maximum:g} (or an array of them)")
    if isinstance(value, str | bytes | bool | np.bool_) or value is None:
        raise ValueError(f"{what}, got {shorten(value)}")
    try:
        array = np.asarray(_plain(value))
        if array.dtype.kind not in "iuf" or array.size == 0:
            raise TypeError
        if array.size > MAX_POINTS:
            raise OverflowError
        array = array.astype(float)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"{what}, got {shorten(value)}") from None
    with np.errstate(invalid="ignore"):
        bad = ~(np.isfinite(array) & (array >= minimum) & (array <= maximum))
    if np.any(bad):
        raise ValueError(f"{what}, got {shorten(array[bad].flat[0].item())}")
    return float(array) if array.ndim == 0 else array


def fraction(name: str, value, *, minimum: float = 1e-3) -> float:
    """A fraction of a peak (MBU, MFU) in ``[minimum, 1]``: 0.1 % to 100 % by default.

    Smaller fractions are refused rather than turned into infinite times.
    """
    try:
        return real(name, value, minimum=minimum, maximum=1.0)
    except ValueError:
        raise ValueError(
            f"{name} must be a fraction of the peak from {minimum:g} to 1, got {shorten(value)}"
        ) from None


def boolean(name: str, value) -> bool:
    """``True`` or ``False`` (also NumPy's): a string such as ``"false"`` is refused, not truthy."""
    if isinstance(value, bool | np.bool_):
        return bool(value)
    raise ValueError(f"{name} must be true or false, got {shorten(value)}")


def _key(name: str) -> str:
    return "".join(ch for ch in name.lower() if ch.isalnum())


def text(name: str, value, *, limit: int = 200, empty: bool = False) -> str:
    """A string of at most ``limit`` characters on one line (not blank unless ``empty``)."""
    if (not isinstance(value, str) or len(value) > limit or "\n" in value or "\r" in value
            or (not empty and not value.strip())):
        raise ValueError(f"{name} must be {'a' if empty else 'a non-empty'} string of at most "
                         f"{limit:,} characters on one line, got {shorten(value)}")
    return value


MAX_ITEMS = 100_000
"""The most items a list argument (names, sizes, rows) may hold."""


def sequence(name: str, value, *, what: str = "values", empty: bool = False) -> list:
    """A list, tuple, range, 1-D array or other iterable (a generator) of at most
    :data:`MAX_ITEMS` items, as a list; a string, a dict or a scalar is refused."""
    from collections.abc import Iterable, Mapping

    what = (f"{name} must be a {'' if empty else 'non-empty '}list of {what} "
            f"(at most {MAX_ITEMS:,})")
    if isinstance(value, np.ndarray):
        value = value.tolist() if value.ndim == 1 else value
    if isinstance(value, str | bytes | Mapping | np.ndarray) or not isinstance(value, Iterable):
        raise ValueError(f"{what}, got {shorten(value)}")
    try:
        items = list(itertools.islice(value, MAX_ITEMS + 1))
    except Exception:  # an iterable that fails while read
        raise ValueError(f"{what}, got {shorten(value)}") from None
    if (not items and not empty) or len(items) > MAX_ITEMS:
        raise ValueError(f"{what}, got {shorten(value)}")
    return items


def names(name: str, value) -> list[str]:
    """A non-empty list of names (strings)."""
    items = sequence(name, value, what="names")
    for i, item in enumerate(items):
        text(f"{name}[{i}]", item)
    return items


def mapping(name: str, value, *, what: str = "name -> value", empty: bool = False) -> dict:
    """A dict (or other mapping) with string keys, as a dict."""
    from collections.abc import Mapping

    if not isinstance(value, Mapping) or (not value and not empty) or len(value) > MAX_ITEMS or (
            not all(isinstance(k, str) for k in value)):
        raise ValueError(f"{name} must be a {'' if empty else 'non-empty '}dict of {what}, got "
                         f"{shorten(value)}")
    return dict(value)


def axes(name: str, ax, *, optional: bool = True):
    """A Matplotlib ``Axes`` (or ``None`` when ``optional``: the function makes one)."""
    if ax is None and optional:
        return None
    try:
        from matplotlib.axes import Axes
    except ImportError:  # pragma: no cover - the library's figures need Matplotlib
        Axes = ()
    if not isinstance(ax, Axes):
        raise ValueError(f"{name} must be a Matplotlib Axes{' or None' if optional else ''}, got "
                         f"{shorten(ax)}")
    return ax


def unknown(name: str, value, known: Iterable[str], close: Iterable[str] = ()) -> ValueError:
    """The one message for a name not found: ``unknown model 'x'; did you mean 'y'? known: ...``.

    The value and each known name are shortened, and the list is cut after 60 names.
    """
    known = [shorten(k, 40)[1:-1] if isinstance(k, str) else shorten(k, 40) for k in known]
    listed = ", ".join(known[:60]) + (f" and {len(known) - 60:,} more" if len(known) > 60 else "")
    close = list(dict.fromkeys(close))
    hint = f"did you mean {' or '.join(shorten(c, 40) for c in close)}? " if close else ""
    return ValueError(f"unknown {name} {shorten(value, 40)}; {hint}known: {listed}")


def options(where: str, given: dict, allowed: Iterable[str]) -> dict:
    """``given`` (a function's ``**options``) if every key is one of ``allowed``; an unknown
    option (a typo such as ``kv_dtpye``) is refused with the closest names, not ignored."""
    allowed = list(allowed)
    for key in given:
        if key not in allowed:
            close = difflib.get_close_matches(str(key), allowed, n=2, cutoff=0.6)
            hint = f"did you mean {' or '.join(map(repr, close))}? " if close else ""
            raise ValueError(f"{where} takes no option {shorten(key, 40)}; {hint}"
                             f"allowed: {', '.join(allowed)}")
    return given


def choice(name: str, value, allowed: Iterable[str], *, aliases: dict[str, str] | None = None) -> str:
    """One of ``allowed`` (or a key of ``aliases``, mapped to its value), with suggestions.

    Matching ignores case, spaces, dashes, dots and underscores (``' Llama_3-70B'`` is
    ``llama-3-70b``); a near miss is answered with the closest names.
    """
    allowed = list(allowed)
    if not isinstance(value, str):
        raise ValueError(f"{name} must be a name, one of {', '.join(allowed)}; got {shorten(value)}")
    table = {_key(a): a for a in allowed}
    for alias, target in (aliases or {}).items():
        table.setdefault(_key(alias), target)
    found = table.get(_key(value))
    if found is not None:
        return found
    key = _key(value[:1000])  # a megabyte-long name is not compared letter by letter
    close = difflib.get_close_matches(key, list(table), n=3, cutoff=0.6)
    raise unknown(name, value, allowed, [table[c] for c in close])


# ---- files -----------------------------------------------------------------------------------

MAX_FILE_BYTES = 16 * 2**20
"""The largest data file the library reads (16 MiB): its own files and a reader's are a few kB."""


def _shown(path) -> str:
    """A path quoted, cut at the front when long: its end (the file's name) is what tells."""
    text = os.fspath(path) if isinstance(path, os.PathLike) else path
    text = text if isinstance(text, str) else repr(text)
    return repr(text) if len(text) <= 100 else repr("…" + text[-99:])


def read_bytes(what: str, path, *, cap: int = MAX_FILE_BYTES) -> bytes:
    """The bytes of the file ``path``, at most ``cap`` of them, for ``what`` (``"config"``).

    Reads at most ``cap + 1`` bytes, so a device (``/dev/zero``), a pipe or a file growing
    while it is read cannot exhaust memory or hang the reader; a folder, a missing file, a
    name too long, an unreadable file and one over ``cap`` bytes raise one-line ``ValueError``
    naming the path.
    """
    if not isinstance(path, str | os.PathLike) or isinstance(os.fspath(path), bytes):
        raise ValueError(f"{what} path must be a file name, got {shorten(path)}")
    name = os.fspath(path)
    shown = _shown(name)
    if not name.strip():
        raise ValueError(f"{what} path is empty; give a file name")
    if "\x00" in name:
        raise ValueError(f"{what} {shown} is not a valid path (it holds a NUL character)")
    try:
        mode = os.stat(name).st_mode
        if stat.S_ISDIR(mode):
            raise ValueError(f"{what} {shown} is a folder, not a file")
        if not stat.S_ISREG(mode) and not stat.S_ISFIFO(mode) and not stat.S_ISCHR(mode):
            raise ValueError(f"{what} {shown} is {what_is(name)}, not a regular file")
        flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) * (not stat.S_ISREG(mode))
        fd = os.open(name, flags)
        with os.fdopen(fd, "rb") as f:
            chunks, size = [], 0
            while size <= cap:
                chunk = f.read(min(cap + 1 - size, 2**20))
                if chunk is None:  # a pipe whose writer has sent nothing yet
                    raise BlockingIOError
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
    except FileNotFoundError:
        kind = what_is(name)
        raise ValueError(f"cannot read {what} {shown}: "
                         f"{'no such file' if kind == 'nothing' else 'it is ' + kind}") from None
    except BlockingIOError:
        raise ValueError(f"{what} {shown} is {what_is(name)} that gives no data now (a pipe "
                         "with no writer?)") from None
    except OSError as err:
        raise ValueError(f"cannot read {what} {shown}: {err.strerror or type(err).__name__}") from None
    if size > cap:
        raise ValueError(f"{what} {shown} is larger than {cap:,} bytes, too large to be "
                         f"a {what} file")
    return b"".join(chunks)


def _no_constant(name: str):
    raise ValueError(f"{name} is not a JSON number")


def read_json(what: str, path, *, cap: int = MAX_FILE_BYTES, parse_float=float):
    """The JSON value of the file ``path`` (read as :func:`read_bytes` does), in strict JSON:
    no ``NaN`` or ``Infinity``, no number of more than 4,300 digits, no nesting too deep for
    Python; each refused with one line naming the path."""
    raw = read_bytes(what, path, cap=cap)
    shown = _shown(path)
    if not raw.strip():
        kind = what_is(path)
        raise ValueError(f"{what} {shown} is empty" + ("" if kind == "a regular file" else
                                                        f" ({kind})"))
    try:
        text = raw.decode("utf-8-sig")
        if "\x00" in text:
            raise UnicodeDecodeError("utf-8", raw, 0, 1, "NUL byte")
    except UnicodeDecodeError:
        raise ValueError(f"{what} {shown} is not a text file (binary?)") from None
    try:
        return json.loads(text, parse_float=parse_float, parse_constant=_no_constant)
    except json.JSONDecodeError as err:
        raise ValueError(f"{what} {shown} is not valid JSON ({err.msg}, line {err.lineno})") from None
    except RecursionError:
        raise ValueError(f"{what} {shown} nests JSON too deeply to read") from None
    except ValueError as err:  # NaN, Infinity, or an integer of more than 4,300 digits
        reason = "a number with too many digits" if "digits" in str(err) else str(err)
        raise ValueError(f"{what} {shown} is not strict JSON ({reason})") from None


# ---- memory ----------------------------------------------------------------------------------


def available_bytes() -> int | None:
    """Memory the system can give a new allocation now (bytes), or None if unknown.

    ``psutil.virtual_memory().available`` if psutil is installed, else ``MemAvailable`` from
    ``/proc/meminfo`` (Linux), else the free physical pages (``os.sysconf``).
    """
    try:
        import psutil
    except ImportError:
        pass
    else:
        return int(psutil.virtual_memory().available)
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def allocation(what: str, nbytes: float) -> None:
    """Refuse, before allocating, ``nbytes`` that would take more than half the memory
    available now (the rest is the notebook's and the system's)."""
    free = available_bytes()
    if free is not None and nbytes > free // 2:
        raise ValueError(
            f"{what} would take {nbytes / 2**20:,.0f} MiB, more than half of the "
            f"{free / 2**20:,.0f} MiB of memory available now; choose smaller sizes")


class OneLineParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line and exit code 2: every command line of the
    package (``llm-roofline``, the calibration's and the student edition's) speaks with it.

    Subclass it and set ``label`` to name another program in its messages.
    """

    label = "llm_roofline"  # the name the one-line error starts with

    def error(self, message: str):
        """Print ``message`` as one line, ``<label>: error: ...``, and exit with code 2."""
        # "argument --batch: --batch must be ..." says the flag once
        found = re.fullmatch(r"argument (\S+): (\1 .*)", message, re.DOTALL)
        message = found.group(2) if found else message
        found = re.fullmatch(r"argument (\S+?)(/\S+)?: expected one argument", message)
        if found:
            message = f"{found.group(1)} needs a value"
        self.exit(2, f"{self.label}: error: {' '.join(message.split())}\n")


def write_atomically(path, text: str, *, prefix: str) -> None:
    """Write ``text`` to ``path`` through a temporary file in the same folder, then rename it:
    a failed write leaves the old file (or none), never half a file. Raises ``OSError``."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{prefix}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


# ---- writers: the one gate for every file the library writes ---------------------------------

NAME_MAX = 255
"""The longest file name (one path component, in bytes) most file systems accept."""


def what_is(path) -> str:
    """What is at ``path``, in words, without following a final link: ``"nothing"``,
    ``"a regular file"``, ``"a folder"``, ``"a FIFO (named pipe)"``, ``"a device"``,
    ``"a socket"``, ``"a dangling link"``, ``"a link to a FIFO (named pipe)"``..."""
    try:
        mode = os.lstat(path).st_mode
    except (OSError, ValueError):
        return "nothing"
    if stat.S_ISLNK(mode):
        try:
            os.stat(path)
        except (OSError, ValueError):
            return "a dangling link"
        return "a link to " + what_is(os.path.realpath(path)).removeprefix("a link to ")
    if stat.S_ISREG(mode):
        return "a regular file"
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "a special file"


def path_name(name: str, value, *, what: str = "file or folder name") -> Path:
    """``value`` as a ``Path`` if it is a usable name: a string or ``os.PathLike`` (not bytes),
    not blank (``""`` is not the current folder), no NUL, no component over :data:`NAME_MAX`
    bytes. The message names ``name`` and the value."""
    text = os.fspath(value) if isinstance(value, str | os.PathLike) else None
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"{name} must be a {what}, got {shorten(value)}")
    if "\x00" in text:
        raise ValueError(f"{name} {_shown(text)} is not a valid path (it holds a NUL character)")
    for part in Path(text).parts:
        try:
            size = len(os.fsencode(part))
        except UnicodeError:  # a lone surrogate the file system cannot encode
            raise ValueError(f"{name} {_shown(text)} is not a valid path (it holds a character "
                             "the file system cannot encode)") from None
        if size > NAME_MAX:
            raise ValueError(f"{name} {_shown(text)}: a name in it is {size:,} bytes long; a file "
                             f"system allows at most {NAME_MAX}")
    return Path(text)


def source_folder(name: str, value) -> Path:
    """``value`` as the ``Path`` of an existing folder a writer reads from, or one line naming
    ``name``, the value and what is there instead (nothing, a file, a FIFO, a dangling link)."""
    path = path_name(name, value, what="folder name")
    kind = what_is(path)
    if kind not in ("a folder", "a link to a folder"):
        raise ValueError(f"{name} {_shown(str(path))} " + (
            "does not exist" if kind == "nothing" else f"is {kind}, not a folder"))
    return path


def _inside(a: Path, b: Path) -> bool:
    return a == b or b in a.parents


def destination(name: str, dest, *, sources: Iterable = (), folder: bool = True) -> Path:
    """The destination ``dest`` of a writer, checked before anything is read or written.

    Refused, each in one line naming ``name``: a bad name (see :func:`path_name`); a
    destination that is one of ``sources`` (the files or folders the writer reads), inside one,
    or holding one (``folder=True``: a folder; else a file); a file or special file where a
    folder must be (``dest`` itself for a folder, or a folder above it); a folder or special
    file where the output file must be.
    """
    dest = path_name(name, dest, what="folder name" if folder else "file name")
    try:
        resolved = dest.resolve()
        for source in sources:
            source = Path(source).resolve()
            if _inside(resolved, source) or _inside(source, resolved):
                raise ValueError(
                    f"{name} {_shown(str(dest))} overlaps the source {_shown(str(source))} (it is "
                    "the source, inside it or holds it): writing there would overwrite what is "
                    "read; choose another folder")
        above = [dest] if folder else []
        above += list(dest.absolute().parents)
        for f in above:
            kind = what_is(f)
            if kind == "nothing":
                continue
            if kind not in ("a folder", "a link to a folder"):
                where = "" if f == dest else f": {_shown(str(f))} above it"
                raise ValueError(f"{name} {_shown(str(dest))}{where} is {kind}, not a folder")
            break
        if not folder:
            kind = what_is(dest)
            if kind not in ("nothing", "a regular file", "a link to a regular file"):
                raise ValueError(f"{name} {_shown(str(dest))} is {kind}, not a file it can replace")
    except OSError as err:
        raise ValueError(f"{name} {_shown(str(dest))}: {err.strerror or type(err).__name__}") from None
    return dest


def marked(path, marker: str, *, cap: int = MAX_FILE_BYTES) -> bool:
    """Whether the regular file ``path`` holds ``marker`` (the writer's signature)."""
    try:
        if not stat.S_ISREG(os.lstat(path).st_mode):
            return False
        with open(path, "rb") as f:
            return marker.encode() in f.read(cap)
    except (OSError, ValueError):
        return False


def replaceable(name: str, path, *, marker: str, force: bool = False,
                flag: str = "--force") -> None:
    """Refuse to replace ``path`` unless it is nothing yet, or a regular file that holds
    ``marker`` (the writer's own output), or ``force`` is true and it is a regular file (or a
    link, which is replaced, not followed). A folder, FIFO or device is never replaced."""
    force = boolean("force", force)
    kind = what_is(path)
    shown = _shown(str(path))
    if kind == "nothing":
        return
    if kind not in ("a regular file", "a dangling link") and not kind.startswith("a link to a regular"):
        raise ValueError(f"{name} {shown} is {kind}, not a file: it cannot be replaced by one")
    if not force and not marked(path, marker):
        raise ValueError(f"{name} {shown} already exists and was not written by this tool "
                         f"({kind}): choose another name, or use {flag} to replace it")


def write_output(name: str, path, text: str, *, marker: str, force: bool = False,
                 flag: str = "--force") -> Path:
    """The one writer: :func:`replaceable`, then :func:`write_atomically`; a failure to write is
    one ``ValueError`` naming the file. ``text`` must hold ``marker`` so that a later run
    recognises the file as its own."""
    path = Path(path)
    if marker not in text:  # pragma: no cover - a writer's own bug
        raise AssertionError(f"{name}: the text written to {path} lacks its marker {marker!r}")
    replaceable(name, path, marker=marker, force=force, flag=flag)
    try:
        write_atomically(path, text, prefix=path.name[:50])
    except OSError as err:
        raise ValueError(f"cannot write {name} {_shown(str(path))}: "
                         f"{err.strerror or type(err).__name__}") from None
    return path
