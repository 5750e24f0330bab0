"""Type stubs of the compiled core (``crates/raidlab-py``)."""

from typing import Callable

__version__: str
TLS_PSK: bool  # `serve --tls-psk` works in this build (the tls-psk feature)

class RaidlabError(Exception):
    """Base of every raidlab error."""

class ConfigError(RaidlabError):
    """A config key or value is unusable; ``key`` is the dotted path (or ``file``/``line``
    for syntax errors)."""

    key: str
    file: str
    line: int

class TraceError(RaidlabError):
    """A trace record is malformed; ``file`` and ``line`` (record number for binary formats)."""

    file: str
    line: int

class FormatError(TraceError):
    """A trace's format is unknown or unsupported."""

class RaidlabIOError(RaidlabError):
    """A file could not be read; ``file`` names it."""

    file: str

class StoreError(RaidlabError):
    """A store member, superblock, array directory or request is unusable; ``file`` names it."""

    file: str

def load_config(
    text: str,
    file: str | None = None,
    base_dir: str | None = None,
    overrides: str | None = None,
    resolved: bool = False,
) -> list[tuple[str, str]]: ...
def run(
    text: str,
    file: str | None = None,
    base_dir: str | None = None,
    threads: int = 1,
    progress: Callable[[int, int, int, int], object] | None = None,
    overrides: str | None = None,
    workload_thread: bool | None = None,
) -> list[tuple[str, str | None, str, RaidlabError | None]]: ...
def trace_stats(
    path: str, format: str = "auto", block_size: int = 4096, limit: int | None = None, device: int | None = None
) -> str: ...
def read_oracle(path: str) -> tuple[int, int]: ...
def cores() -> int: ...
def spare_cores(runs: int) -> bool: ...
def parse_size(text: str) -> float: ...
def reliability(text: str, file: str | None = None, overrides: str | None = None) -> str: ...
def curve(
    text: str,
    file: str | None = None,
    base_dir: str | None = None,
    overrides: str | None = None,
    sizes: list[str] | None = None,
    sample_rate: float | None = None,
    sample_size: int | None = None,
) -> str: ...

def array_create(
    dir: str,
    level: str,
    disks: int,
    chunk: str,
    size: str,
    layout: str | None = None,
    spares: int = 0,
    name: str | None = None,
    members: list[str] = ...,
    force: bool = False,
    bitmap_chunk: str | None = None,
) -> str: ...
def array_examine(dir: str) -> str: ...
def serve(
    dir: str,
    listen: str,
    cache: str | None = None,
    cache_mib: int | None = None,
    rebuild_order: str = "sequential",
    rebuild_min_kib_s: int | None = None,
    rebuild_max_kib_s: int | None = None,
    rebuild_run_kib: int | None = None,
    rebuild_executor: str | None = None,
    workers: int | None = None,
    ready: Callable[[str], None] | None = None,
    write_cache_mib: int | None = None,
    destage: str = "stow",
    thresholds: str = "80/20",
    max_destages: int = 16,
    backup: str = "mirror",
    backup_path: str | None = None,
    log_mode: str = "physical",
    log_size: str | None = None,
    segment: str = "128KiB",
    log_nvram: str | None = None,
    log_nvram_slots: int | None = None,
    backup_discard: bool = False,
    min_block: int = 1,
    handshake_timeout: float = 10.0,
    idle_timeout: float = 30.0,
    max_connections: int = 128,
    payload_mib: int = 128,
    conn_payload_mib: int = 32,
    zero_piece_mib: int = 4,
    poll_us: int = 50,
    insecure: bool = False,
    force: bool = False,
    read_only: bool = False,
    tls: str = "off",
    tls_certificates: str | None = None,
    tls_psk: str | None = None,
    tls_verify_peer: bool = False,
    log_format: str = "text",
    log_level: str = "info",
    event_program: str | None = None,
    event_timeout: float = 30.0,
    timing: str | None = None,
) -> str: ...
def ctl_request(dir: str, request: str) -> str: ...
def replay(
    uri: str,
    text: str,
    file: str | None = None,
    base_dir: str | None = None,
    qd: int = 1,
    time_scale: float | None = None,
    requests_max: int | None = None,
    schedule: bool = False,
    log: str | None = None,
) -> str: ...
