"""Files r3's commands are handed: the YAML they read, the folders they write.

A path holding a control character, or longer than Linux takes, is refused before anything is made
(:func:`path_problem`, the one rule for every command's paths). A config or graph file that is not a
YAML mapping is refused with its path and the parser's first line, never a traceback.
``--overwrite`` means "replace my earlier output", never "empty this folder": a folder holding
anything the command does not write (its input bags, the current folder's files, another dataset's
parent) is refused with a reason, so a mistyped ``--out`` (empty, ``.``, the input folder, a parent
of it) can lose nothing. What a command wrote is known by the mark it leaves (:data:`OUTPUT_MARK`),
not by the names of its entries: a user's own ``data/`` folder has the name a dataset's rows have. A
command that continues its own earlier output (``r3 collect``, ``r3 mini``) writes only into a new
or empty folder or one holding that output (:func:`resumable_output`), one run at a time: the run
holds its folder (:func:`hold_output`).
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import glob
import json
import math
import os
import reprlib
import shutil
import stat
import tempfile
import unicodedata
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

import yaml

from r3.numerals import says_its_digits

OUTPUT_MARK = ".r3_output"


def bounded_repr(value: object, width: int = 60) -> str:
    """``repr(value)``, at most ``width`` characters, for a refusal that quotes what a file held.

    Built within that bound (6 items of each of 3 levels at most): a YAML file's aliases nest a list
    a billion items deep in a few hundred bytes, and ``f"{value!r:.60}"`` builds its whole repr
    (gigabytes) before cutting it."""
    shown = reprlib.Repr()
    shown.maxlevel, shown.maxstring, shown.maxother, shown.maxlong = 3, width, width, width
    try:
        text = shown.repr(value)
    except ValueError:  # an int past Python's digit limit for str (a YAML hex number can make one)
        text = f"<a {type(value).__name__} too long to show>"
    return text if len(text) <= width else f"{text[: width - 3]}..."


#: Bidirectional-text controls and marks: they make text display in another order than it is read.
BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c")


def is_control(char: str) -> bool:
    """A character that changes how a terminal or a line shows text, other than tab and newline (the
    line and paragraph separators break a line as a newline does, unseen in a log)."""
    return char not in "\t\n" and (unicodedata.category(char) in ("Cc", "Zl", "Zp") or char in BIDI_CONTROLS)


def printable(text: str) -> str:
    """``text`` with each control character written as its escape (a model's answer may hold a
    terminal escape: the live views show it, they do not obey it)."""
    return "".join(ascii(c)[1:-1] if is_control(c) else c for c in text)


#: The most characters of one answer (its reasoning, its instruction) a live view shows.
SHOWN_CHARACTERS = 4000


def shown_text(text: str, limit: int = SHOWN_CHARACTERS) -> str:
    """``text`` as a live view shows it: :func:`printable`, and cut after ``limit`` characters with
    "... (N characters)" saying how long it was (a 20 MB answer is not printed whole)."""
    if len(text) <= limit:
        return printable(text)
    return f"{printable(text[:limit])}... ({len(text)} characters)"


def one_line(text: str, limit: int) -> str:
    """What another program wrote (a server's error page, an installed package's exception), for one
    line of a message: its whitespace runs one space, then :func:`shown_text` (escapes written out,
    cut after ``limit`` characters)."""
    return shown_text(" ".join(text.split()), limit)


#: The longest name of one file or folder Linux's filesystems take (NAME_MAX), in bytes.
NAME_MAX_BYTES = 255
#: The longest path a Linux system call takes (PATH_MAX less its closing NUL), in bytes.
PATH_MAX_BYTES = 4095
#: Bytes an output folder leaves of those for what r3 makes beside it (its staging folder is named
#: ``.NAME.partial-PID-XXXXXXXX``, and that with ``-earlier``: :func:`replaced_output`) and under it
#: (a run's episode folders, checkpoints and their files).
OUTPUT_NAME_ROOM = 40
OUTPUT_PATH_ROOM = 1024


def one_line_problem(text: str) -> str | None:
    """Why ``text`` cannot be a name that shows as one line in every record, log and message (a path,
    a frame id, a topic): it holds a control character (:func:`is_control`, tab and newline too), an
    invisible format character (Unicode Cf) or a byte that is not UTF-8 (a lone surrogate, which no
    JSON or manifest can hold); None when it holds none."""
    for i, char in enumerate(text):
        if unicodedata.category(char) == "Cs":
            return f"{bounded_repr(text)} holds a byte that is not UTF-8 (U+{ord(char):04X}) at {i}"
        if char in "\t\n" or is_control(char) or unicodedata.category(char) == "Cf":
            return f"{bounded_repr(text)} holds the control character U+{ord(char):04X} at {i}"
    return None


def path_problem(path: str | Path, *, name_room: int = 0, path_room: int = 0) -> str | None:
    """Why ``path`` cannot name a file or folder r3 reads or writes; None when it can.

    A path is one line of every record, log and message that names it (:func:`one_line_problem`). Its names
    and the whole of it, made absolute, must fit what Linux takes less ``name_room`` (its last name)
    and ``path_room`` bytes that r3 adds, so that it is refused here, not by an OSError mid-run."""
    text = os.fspath(path)
    if problem := one_line_problem(text):
        return problem
    names = [name for name in Path(text).parts if name != os.sep]
    for n, name in enumerate(names, 1):
        size, most = len(os.fsencode(name)), NAME_MAX_BYTES - (name_room if n == len(names) else 0)
        if size > most:
            return f"{bounded_repr(text)}: the name {bounded_repr(name)} is {size} bytes long; at most {most}"
    size, most = len(os.fsencode(os.path.abspath(text))), PATH_MAX_BYTES - path_room
    if size > most:
        return f"{bounded_repr(text)} is {size:,} bytes long (made absolute); at most {most:,}"
    return None


def folder_problem(path: str | Path) -> str | None:
    """Why ``path`` cannot be a folder to write: a path no output may have (:func:`path_problem`), a
    file, a broken link, beneath a file, beneath a folder this user may not write, or on a filesystem
    that takes no files (read-only, /proc); None when it is one or can be made one."""
    if problem := _output_path_problem(path):
        return problem
    path = Path(path)
    try:
        if path.exists() and not path.is_dir():
            return f"{path} is a file, not a folder"
        if path.is_symlink() and not path.exists():
            return f"{path} is a link to {os.readlink(path)}, which does not exist"
        existing = next(p for p in (path.absolute(), *path.absolute().parents) if p.exists())
    except OSError as exc:  # a parent this user may not look into
        return f"{path}: {exc.strerror or exc}"
    if not existing.is_dir():
        return f"{path}: no folder can be made under {existing}, a file"
    if not os.access(existing, os.W_OK | os.X_OK):
        return f"{path}: {existing} is not writable"
    disk = os.statvfs(existing)
    if disk.f_flag & os.ST_RDONLY or disk.f_blocks == 0:  # root may "write" /proc; it makes no folder there
        return f"{path}: {existing} is on a read-only or virtual filesystem"
    return None


def is_kind(value: object, kind: type) -> bool:
    """Whether ``value``, as a JSON or YAML file held it, is a ``kind``: a bool is no number (Python
    counts it as an int), a float is any finite number, whole or not."""
    if kind is bool or isinstance(value, bool):
        return kind is bool and isinstance(value, bool)
    if kind is float:
        return isinstance(value, int | float) and math.isfinite(value)
    return isinstance(value, kind)


def find_folders(paths: Iterable[str | Path], is_one: Callable[[Path], bool], what: str) -> list[Path]:
    """The folders ``paths`` name, sorted by name: each path is one (``is_one``) or holds some.

    Each folder once, under the first name it was given, however many names lead to it (a relative
    and an absolute path, a symlink): a command would otherwise read it, and write its episodes, twice.
    A path that is no folder is a NotADirectoryError saying it should be ``what``.
    """
    found: dict[Path, Path] = {}  # the folder itself -> the name it was given
    for path in map(Path, paths):
        if not path.is_dir():
            raise NotADirectoryError(f"{path} is not a directory (expected {what})")
        named = [path] if is_one(path) else sorted(p for p in path.iterdir() if p.is_dir() and is_one(p))
        for folder in named:
            found.setdefault(folder.resolve(), folder)
    return sorted(found.values(), key=lambda p: (p.name, str(p)))


class FileRefused(ValueError):
    """A file or folder a command cannot read or write as asked; the message says why."""


#: The most bytes a small file r3 reads whole (a mark, a config, a bag's metadata.yaml or sidecar) may
#: hold; one past it is refused, not read into memory.
SMALL_FILE_BYTES = 16 * 2**20


def read_small_text(path: str | Path, limit: int = SMALL_FILE_BYTES) -> str:
    """The UTF-8 text of the regular file ``path``, at most ``limit`` bytes.

    A FileRefused naming the file when it is no regular file (a FIFO would block the read forever, a
    device such as /dev/zero never end it) or holds more than ``limit`` bytes; UnicodeDecodeError (a
    ValueError) when it is no UTF-8 text; FileNotFoundError (an OSError, as others) when there is
    none. Opened without blocking and checked on the open file, so that what is checked is read."""
    path = Path(path)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as f:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = "a folder" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode) else "a special file"
            raise FileRefused(f"{path} is {kind}, not a regular file")
        data = f.read(limit + 1)
    if len(data) > limit:
        raise FileRefused(f"{path} holds more than {limit} bytes, more than such a file does")
    return data.decode()


def json_value(text: str | bytes, **options) -> object:
    """``json.loads(text, **options)``, where JSON nested past Python's recursion limit is a ValueError
    like any other malformed JSON (json raises RecursionError for it)."""
    try:
        return json.loads(text, **options)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None


def repeated_key(pairs: Iterable[tuple[str, object]]) -> str | None:
    """The first key that comes twice in a JSON object's (key, value) pairs, None when none does (for an
    ``object_pairs_hook``): ``json`` keeps a repeated key's last value without a word, so one text would
    hold two answers, and a reader that keeps the first would act on the other.

    >>> repeated_key([("a", 1), ("b", 2), ("a", 3)]), repeated_key([("a", 1)])
    ('a', None)
    """
    seen = set()
    for key, _ in pairs:
        if key in seen:
            return key
        seen.add(key)
    return None


def yaml_value(text: str, loader: type = yaml.SafeLoader) -> object:
    """The YAML document ``text`` holds, read with ``loader``, where YAML nested past Python's recursion
    limit, a date that is none (2001-13-45) or an integer past Python's 4,300 digits is a
    yaml.YAMLError like any other malformed YAML (PyYAML raises RecursionError or ValueError)."""
    try:
        return yaml.load(text, Loader=loader)  # a safe loader: SafeLoader or libyaml's CSafeLoader
    except RecursionError:
        raise yaml.YAMLError("YAML nested too deeply") from None
    except ValueError as exc:
        raise yaml.YAMLError(f"a value YAML cannot make: {bounded_repr(str(exc), 120)}") from None


class _ConfigLoader(yaml.SafeLoader):
    """A safe loader for the files people write: a mapping giving one key twice is refused (PyYAML
    keeps the last value, and the first, which its author may be editing, was dropped without a
    word), and a number is the number its digits 0-9 say or stays text (``seed: 010`` was seed 8,
    YAML 1.1's octal; :func:`r3.numerals.says_its_digits`), for the reader's type check to name."""

    def construct_number(self, node):
        read = self.construct_yaml_int if node.tag == "tag:yaml.org,2002:int" else self.construct_yaml_float
        number = read(node)
        return number if says_its_digits(number, node.value) else node.value

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # "<<: *defaults" may be overridden
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                given_twice = key in seen
            except TypeError:  # an unhashable key, which the safe loader refuses itself
                continue
            if given_twice:
                line = key_node.start_mark.line + 1
                raise yaml.constructor.ConstructorError(
                    None, None, f"the key {key!r} is given twice (line {line})"
                )
            seen.add(key)
        return super().construct_mapping(node, deep)


_ConfigLoader.add_constructor("tag:yaml.org,2002:int", _ConfigLoader.construct_number)
_ConfigLoader.add_constructor("tag:yaml.org,2002:float", _ConfigLoader.construct_number)


def read_yaml_mapping(path: str | Path, what: str = "config file") -> dict:
    """The mapping in YAML file ``path`` (an empty file is an empty mapping; a key given twice is
    refused); ``what`` the file is, for the refusal of a path that is no such file."""
    path = Path(path)
    if not path.is_file():
        why = "not found" if not path.exists() else "a folder" if path.is_dir() else "not a regular file"
        raise FileRefused(f"{what} {path}: {why}; expected a YAML file")
    try:
        data = yaml_value(read_small_text(path), _ConfigLoader) or {}
    except OSError as exc:
        raise FileRefused(f"{what} {path}: {exc.strerror or exc}") from None
    except (UnicodeDecodeError, yaml.YAMLError) as exc:
        raise FileRefused(f"{path} is not a YAML file: {str(exc).splitlines()[0]}") from None
    if not isinstance(data, dict):
        raise FileRefused(f"{path}: expected a mapping at the top level, got {type(data).__name__}")
    return data


def unfinished_copy(path: str | Path) -> Path:
    """Where :func:`write_atomically` writes ``path``'s new content before it moves it in: what a run
    killed in that write (SIGKILL, power) leaves beside ``path``, and nothing else."""
    path = Path(path)
    return path.with_name(f"{path.name}.tmp")


def write_atomically(path: str | Path, write: Callable[[Path], object]) -> None:
    """Have ``write`` make ``path``'s new content in a ``.tmp`` file beside it, moved over ``path`` once
    whole, so a run stopped while writing (a kill, Ctrl-C, a full disk) leaves the earlier file or the
    new one, never one cut short; a ``write`` that fails takes its ``.tmp`` file with it, and its
    OSError (a full disk) names ``path``, not the ``.tmp`` file that is gone."""
    path = Path(path)
    tmp = unfinished_copy(path)
    try:
        write(tmp)
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        named = exc.filename  # None from a write(), which names no file
        if named is None or (
            isinstance(named, str | bytes | os.PathLike) and Path(os.fsdecode(named)) == tmp
        ):
            exc.filename = str(path)
        raise
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_text_atomically(path: str | Path, text: str) -> None:
    """Write ``text`` to ``path`` whole or not at all (:func:`write_atomically`): a file a resumed run
    reads to know its earlier output, or a table a reader takes as whole."""
    write_atomically(path, lambda tmp: tmp.write_text(text))


def save_figure(fig, path: Path, **options) -> None:
    """Save matplotlib figure ``fig`` to ``path`` in the format its suffix names (``options`` go to
    ``savefig``) and close it; a run stopped while saving leaves the earlier chart or the new one,
    never one cut short (:func:`write_atomically`)."""
    import matplotlib.pyplot as plt

    try:
        write_atomically(path, lambda tmp: fig.savefig(tmp, format=path.suffix.lstrip("."), **options))
    finally:
        plt.close(fig)


def _remove_abandoned_staging(target: Path) -> None:
    """Remove the staging folders of ``target`` whose process is gone (a command killed mid-write left
    them, each as large as its output, and no later run took them away); a live one's stays."""
    for staging in target.parent.glob(f".{glob.escape(target.name)}.partial-*"):
        pid = staging.name[len(target.name) + len(".partial-") + 1 :].split("-", 1)[0]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists() and staging.is_dir():
            shutil.rmtree(staging, ignore_errors=True)


def _is_earlier_output(out: Path, what: str, made_before_marks: Callable[[Path], bool] | None) -> bool:
    """Whether ``out`` holds ``what`` as r3 wrote it: its mark, which goes in before its other entries
    and out after them, so an output torn by a crash has it too; or, for outputs written before
    there were marks, ``made_before_marks`` (a check of the output's own index file)."""
    marked = _marked_as(out)
    if marked is not None:
        return marked == what
    return made_before_marks is not None and made_before_marks(out)


def _marked_as(out: Path) -> str | None:
    """What ``out``'s mark says it holds; None without a mark that reads as one."""
    try:
        return json_value(read_small_text(out / OUTPUT_MARK)).get("what")
    except (OSError, ValueError, AttributeError):
        return None


def _unmarked(out: Path) -> str:
    """What ``out``, holding no mark that reads as one, has in place of the mark, in words."""
    mark = out / OUTPUT_MARK
    if mark.exists() or mark.is_symlink():
        return f"its {OUTPUT_MARK} is unreadable or no mark r3 wrote"
    return f"no {OUTPUT_MARK} mark"


def _output_path_problem(out: str | Path) -> str | None:
    """Why ``out`` cannot be the path of an output folder (:func:`path_problem`, with room for what a
    command makes beside and under it)."""
    return path_problem(out, name_room=OUTPUT_NAME_ROOM, path_room=OUTPUT_PATH_ROOM)


def _output_folder(out: str | Path, what: str) -> Path:
    """``out`` as a folder for ``what``; a FileRefused for a path no output may have, the current
    folder, the filesystem root or a file, which no command's output may go into."""
    if problem := _output_path_problem(out):
        raise FileRefused(problem)
    out = Path(out)
    if str(out).strip() in ("", "."):
        raise FileRefused(f"refusing to write {what} into the current folder; name a folder for it")
    if out.exists() and not out.is_dir():
        raise FileRefused(f"{out} is a file, not a folder for {what}")
    target = out.resolve()
    if target.parent == target:
        raise FileRefused(f"refusing to write {what} into {out}; name a folder for it")
    return out


def resumable_output(
    out: str | Path, what: str, *, made_before_marks: Callable[[Path], bool] | None = None
) -> None:
    """A FileRefused unless ``out`` may hold ``what``, the output of a command that continues its own
    earlier output (``r3 collect``, ``r3 mini``): a new or empty folder, or one holding an earlier
    ``what`` (see :func:`_is_earlier_output`). Never the current folder, the filesystem root or a
    folder holding anything else (a user's files, another command's output), which its files would
    be mixed into. Writes nothing; :func:`mark_output` claims the folder once the command starts."""
    out = _output_folder(out, what)
    held = sorted(entry.name for entry in out.iterdir()) if out.is_dir() else []
    if held and not _is_earlier_output(out, what, made_before_marks):
        marked = _marked_as(out)
        held = [name for name in held if name != OUTPUT_MARK] or held
        shown = ", ".join(held[:3]) + (f" and {len(held) - 3} more" if len(held) > 3 else "")
        whose = (
            f"r3 marked it as {bounded_repr(marked)}"
            if marked
            else f"no {what} that r3 wrote, {_unmarked(out)}"
        )
        raise FileRefused(
            f"{out} holds {shown} ({whose}): not writing {what} into it; choose a new or empty folder"
        )


def mark_output(out: str | Path, what: str, *, hold: bool = True) -> Path:
    """Make folder ``out`` and mark it as holding ``what``, before anything else goes in, so that a run
    stopped at any point leaves a folder :func:`resumable_output` knows as its own; ``out``.

    With ``hold``, this process holds the folder (:func:`hold_output`) until it exits: a second command
    started on ``out`` while this one runs is a FileRefused, before it writes anything there."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    if not _is_earlier_output(out, what, None):
        (out / OUTPUT_MARK).write_text(json.dumps({"what": what}) + "\n")
    if hold:
        hold_output(out, what)
    return out


#: The output folders this process holds: the open folder whose lock says so.
_HELD_OUTPUTS: dict[Path, int] = {}


def hold_output(out: Path, what: str) -> None:
    """Take an exclusive ``flock`` on folder ``out`` itself for the rest of this process (the kernel
    drops it when the process ends, however it ends: a killed run leaves no lock behind); a FileRefused
    when another process holds it (a run of a command writing ``what`` there, working, or frozen with
    SIGSTOP). Holding it again from this process is a no-op."""
    held = _HELD_OUTPUTS.get(out.resolve())
    if held is not None and os.path.samestat(os.fstat(held), out.stat()):
        return
    fd = os.open(out, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise FileRefused(
            f"{out} is in use: another running command is writing {what} there; "
            "wait for it to end (or stop it) and run again"
        ) from None
    if held is not None:
        os.close(held)
    _HELD_OUTPUTS[out.resolve()] = fd


def replaceable_output(
    out: str | Path,
    writes: Iterable[str],
    *,
    overwrite: bool,
    what: str,
    made_before_marks: Callable[[Path], bool] | None = None,
) -> list[Path]:
    """The entries of ``out`` that writing ``what`` there would replace (see :func:`replaced_output`);
    a FileRefused or FileExistsError saying why it may not be written there. A command whose output
    comes only after long work asks this first."""
    out = _output_folder(out, what)
    writes = {*writes, OUTPUT_MARK}
    earlier = sorted(out.iterdir()) if out.is_dir() else []
    if earlier:
        if not overwrite:
            raise FileExistsError(f"{out} is not empty (pass --overwrite to replace an earlier {what})")
        foreign = [entry.name for entry in earlier if entry.name not in writes]
        if foreign:
            shown = ", ".join(foreign[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3 else "")
            raise FileRefused(f"{out} holds {shown}, which {what} does not write: not replacing it")
        if not _is_earlier_output(out, what, made_before_marks):
            marked = _marked_as(out)
            whose = f"r3 marked it as {bounded_repr(marked)}" if marked else _unmarked(out)
            raise FileRefused(
                f"{out} holds no {what} that r3 wrote ({whose}): not replacing it; "
                "remove it yourself or choose another folder"
            )
    return earlier


@contextmanager
def replaced_output(
    out: str | Path,
    writes: Iterable[str],
    *,
    overwrite: bool,
    what: str,
    made_before_marks: Callable[[Path], bool] | None = None,
) -> Iterator[Path]:
    """An empty folder for ``what`` (a command's output, in words) to write; on success its entries
    become ``out``'s, with the mark that says ``what`` they are.

    ``writes`` names the entries ``what`` creates at the top of ``out``. A folder that is not empty is
    replaced only with ``overwrite``, only when it holds an earlier ``what`` (whole or torn by a crash:
    see :func:`_is_earlier_output`) and only when each of its entries is one of those; anything else
    there is refused and left alone (:func:`replaceable_output`). The new output is written beside
    ``out`` and swapped in only once whole, in one step (:func:`_exchange`), so a command that fails or
    is stopped at any moment (no readable source, a full disk, Ctrl-C, a kill) leaves the earlier
    output as it was or the new one, never some of each.
    """
    replaceable_output(out, writes, overwrite=overwrite, what=what, made_before_marks=made_before_marks)
    target = Path(out).resolve()
    target.parent.mkdir(parents=True, exist_ok=True)
    _remove_abandoned_staging(target)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.partial-{os.getpid()}-", dir=target.parent))
    try:
        yield staging
        (staging / OUTPUT_MARK).write_text(json.dumps({"what": what}) + "\n")
        target.mkdir(exist_ok=True)
        os.chmod(staging, stat.S_IMODE(target.stat().st_mode))  # mkdtemp made it private
        _exchange(staging, target)  # staging now holds the earlier output, removed below
    finally:
        shutil.rmtree(staging, ignore_errors=True)


_RENAME_EXCHANGE = 2  # renameat2's flag (linux/fs.h)
_AT_FDCWD = -100


def _exchange(a: Path, b: Path) -> None:
    """Swap folders ``a`` and ``b`` in one step (Linux's ``renameat2`` with ``RENAME_EXCHANGE``), so a
    process stopped at any moment leaves ``b`` whole, before or after; where the filesystem cannot
    (NFS, an old kernel), ``b`` is moved aside and ``a`` in: stopped between those two renames, ``b``
    is missing and its earlier output lies beside it in a staging folder the next run removes."""
    libc = ctypes.CDLL(None, use_errno=True)
    renameat2 = getattr(libc, "renameat2", None)
    if renameat2 is not None:
        if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
            return
        if ctypes.get_errno() not in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
            code = ctypes.get_errno()
            raise OSError(code, os.strerror(code), str(b))
    aside = a.with_name(f"{a.name}-earlier")
    os.rename(b, aside)
    os.rename(a, b)
    os.rename(aside, a)
