"""``DIR/raidlab.toml``: the options ``raidlab serve DIR`` starts with.

Read at every start; an option given on the command line wins over the file. Written by
``raidlab serve DIR ... --save-config`` with the options given on the command line (and
those the file already held). Keys are the long options without their dashes in front::

    listen = "127.0.0.1:10809"
    cache = "vdf-lru"
    cache-mib = 256
    log-format = "json"
    event-program = "/usr/local/sbin/raidlab-alert"
    tls = "require"
    tls-psk = "/etc/raidlab/tank.psk"

A key the file may not hold, a value of the wrong type or a file that is not TOML is a
``ConfigError`` (exit 2) naming the file, the line and the key; a value the server refuses
(an unknown policy) is reported the same way.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import tomllib
from pathlib import Path
from typing import Any

from raidlab import _core

CONFIG_NAME = "raidlab.toml"

# Key in the file -> (argparse dest, accepted Python types, what to say when wrong).
KEYS: dict[str, tuple[str, tuple[type, ...], str]] = {
    "listen": ("listen", (str,), 'a string such as "127.0.0.1:10809" or "unix:/run/tank.sock"'),
    "cache": ("cache", (str,), 'a policy name such as "lru"'),
    "cache-mib": ("cache_mib", (int, str), 'MiB as an integer, or a size such as "512MiB"'),
    "write-cache-mib": ("write_cache_mib", (int, str), 'MiB as an integer, or a size such as "256MiB"'),
    "destage": ("destage", (str,), 'a destage order such as "stow"'),
    "thresholds": ("thresholds", (str,), 'a string such as "80/20"'),
    "max-destages": ("max_destages", (int,), "an integer from 1 to 256"),
    "backup": ("backup", (str,), '"mirror", "log" or "none"'),
    "backup-path": ("backup_path", (str,), "a path"),
    "rebuild-order": ("rebuild_order", (str,), '"sequential" or "pro"'),
    "rebuild-min-kib": ("rebuild_min_kib", (int,), "KiB/s as a positive integer"),
    "rebuild-max-kib": ("rebuild_max_kib", (int,), "KiB/s as a positive integer"),
    "rebuild-run-kib": ("rebuild_run_kib", (int,), "KiB as a positive integer (4 to 1024)"),
    "rebuild-executor": ("rebuild_executor", (str,), '"runs" or "dor[,buffers=N][,depth=N]"'),
    "workers": ("workers", (int,), "a positive integer"),
    "timing": ("timing", (str,), 'a string such as "wd10eals,scheduler=sstf"'),
    "log-format": ("log_format", (str,), '"text" or "json"'),
    "log-level": ("log_level", (str,), '"error", "warn", "info" or "debug"'),
    "event-program": ("event_program", (str,), "a program path"),
    "event-timeout": ("event_timeout", (int, float), "seconds"),
    "member-timeout": ("member_timeout", (int, float), "seconds"),
    "missing-grace": ("missing_grace", (int, float), "seconds"),
    "tls": ("tls", (str,), '"off", "on" or "require"'),
    "tls-certificates": ("tls_certificates", (str,), "a directory path"),
    "tls-psk": ("tls_psk", (str,), "a PSK file path (username:hexkey lines)"),
}
DESTS = {dest: key for key, (dest, _, _) in KEYS.items()}
PATH_KEYS = ("backup-path", "event-program", "tls-certificates", "tls-psk")
# The argparse type of each option (a value from the file goes through it too).
_TYPES: dict[str, Any] = {}


class Default:
    """An argparse default, marked so a value from the file can take its place."""

    def __init__(self, value: Any) -> None:
        self.value = value

    def __repr__(self) -> str:
        return repr(self.value)


def mark_defaults(parser: argparse.ArgumentParser) -> None:
    """Wrap the defaults of the options the file may set (call once the options exist)."""
    for action in parser._actions:
        if action.dest in DESTS:
            action.default = Default(action.default)
            _TYPES[action.dest] = action.type


def config_path(dir: str) -> Path:
    return Path(dir) / CONFIG_NAME


def _error(file: Path, line: int, key: str, msg: str) -> _core.ConfigError:
    e = _core.ConfigError(f"{file}:{line}: {key}: {msg}" if key else f"{file}:{line}: {msg}")
    e.file, e.line, e.key = str(file), line, key
    return e


def _line_of(text: str, key: str) -> int:
    pat = re.compile(r'^\s*(?:"|\')?' + re.escape(key) + r'(?:"|\')?\s*[=.\]]')
    for i, line in enumerate(text.splitlines(), 1):
        if pat.match(line) or line.strip() == f"[{key}]":
            return i
    return 1


class Loaded:
    """The file's values (by argparse dest) and where each key is."""

    def __init__(self, path: Path, values: dict[str, Any], lines: dict[str, int]) -> None:
        self.path = path
        self.values = values
        self.lines = lines


def load(dir: str) -> Loaded | None:
    """``DIR/raidlab.toml`` checked, or None when there is no such file."""
    path = config_path(dir)
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    except OSError as e:
        err = _core.RaidlabIOError(f"{path}: {e.strerror or e}")
        err.file = str(path)
        raise err from None
    try:
        tree = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        m = re.search(r"line (\d+)", str(e))
        raise _error(path, int(m.group(1)) if m else 1, "", f"not valid TOML: {e}") from None
    values: dict[str, Any] = {}
    lines: dict[str, int] = {}
    for key, v in tree.items():
        line = _line_of(text, key)
        if key not in KEYS:
            raise _error(path, line, key, f"unknown key (expected one of {', '.join(KEYS)})")
        dest, types, what = KEYS[key]
        ok = isinstance(v, types) and not isinstance(v, bool)
        if ok and isinstance(v, (int, float)) and not v > 0:
            ok = False
        if not ok:
            raise _error(path, line, key, f"expected {what}, got {json.dumps(v, default=str)}")
        if key in PATH_KEYS and isinstance(v, str) and not os.path.isabs(v):
            v = str(Path(dir).absolute() / v)
        values[dest] = v
        lines[dest] = line
    return Loaded(path, values, lines)


def resolve(args: argparse.Namespace) -> Loaded | None:
    """Fill in the options not given on the command line from ``DIR/raidlab.toml``, then
    their defaults. Returns the file's contents (None without one)."""
    loaded = load(args.dir)
    given: list[str] = []
    for dest in DESTS:
        v = getattr(args, dest, None)
        if not isinstance(v, Default):
            given.append(dest)
            continue
        if loaded is not None and dest in loaded.values:
            fv = loaded.values[dest]
            conv = _TYPES.get(dest)
            if conv is not None:
                try:
                    fv = conv(str(fv))
                except (argparse.ArgumentTypeError, ValueError) as e:
                    raise _error(loaded.path, loaded.lines[dest], DESTS[dest], str(e)) from None
            setattr(args, dest, fv)
        else:
            setattr(args, dest, v.value)
    args._config_given = given
    return loaded


def blame(loaded: Loaded | None, err: _core.ConfigError, given: list[str]) -> _core.ConfigError:
    """The server's ``ConfigError`` about an option that came from the file, said of the
    file's line and key instead (the error unchanged otherwise)."""
    option = getattr(err, "key", "") or ""
    dest = option.lstrip("-").replace("-", "_")
    if loaded is None or dest not in loaded.values or dest in given:
        return err
    msg = str(err)
    return _error(loaded.path, loaded.lines[dest], DESTS[dest], msg)


def save(args: argparse.Namespace, loaded: Loaded | None) -> Path:
    """Write ``DIR/raidlab.toml``: the options given on the command line and those the file
    held. Returns its path."""
    path = config_path(args.dir)
    keep = set(getattr(args, "_config_given", [])) | set(loaded.values if loaded else {})
    out = [
        "# raidlab serve's options for this array (`raidlab serve DIR --save-config` wrote it).",
        "# Keys are the long options; the command line wins over this file.",
    ]
    for key, (dest, _, _) in KEYS.items():
        v = getattr(args, dest, None)
        if dest not in keep or v is None:
            continue
        if key in PATH_KEYS:
            v = os.path.abspath(v)
        out.append(f"{key} = {json.dumps(v) if isinstance(v, str) else v}")
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("\n".join(out) + "\n")
    tmp.replace(path)
    return path
