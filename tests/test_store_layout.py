"""An independent check of the store's on-disk layout against Linux md's definitions.

A real NBD client (nbdcopy, then a few qemu-io partial-stripe writes) writes pseudo-random
bytes over the whole device; the server is stopped and the member files are read directly at
the data offset. Every chunk must be where md's mapping puts it (written here from md's
``raid5_compute_sector``, raid0 and raid10 "near 2", not by calling raidlab), the P chunks
the XOR of the row's data and the Q chunks md's RAID-6 syndrome computed here over GF(2^8)
(polynomial 0x11d, generator {02}, data taken in md's syndrome order).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from store_fixtures import (
    DATA_OFFSET,
    KiB,
    MiB,
    ServerPool,
    create_array,
    examine,
    qemu_io,
    random_file,
    require_tools,
    status,
    store_servers,  # noqa: F401 (fixture)
    tool_ok,
)

CHUNK = 64 * KiB
MEMBER = 1 * MiB  # data bytes per member: 16 rows of 64 KiB chunks
ROWS = MEMBER // CHUNK

# ---------------------------------------------------------------------------- GF(2^8)

_EXP = [0] * 512
_LOG = [0] * 256
_x = 1
for _i in range(255):
    _EXP[_i] = _x
    _LOG[_x] = _i
    _x <<= 1
    if _x & 0x100:
        _x ^= 0x11D
for _i in range(255, 512):
    _EXP[_i] = _EXP[_i - 255]


def gf_mul(a: int, b: int) -> int:
    if a == 0 or b == 0:
        return 0
    return _EXP[_LOG[a] + _LOG[b]]


# MUL[c] multiplies every byte of a buffer by c with bytes.translate.
MUL = [bytes(gf_mul(c, x) for x in range(256)) for c in range(256)]


def test_gf_tables() -> None:
    # {02} generates the whole multiplicative group of GF(2^8) mod 0x11d.
    assert sorted(_EXP[:255]) == list(range(1, 256))
    assert gf_mul(0x80, 2) == 0x1D and gf_mul(0x8E, 2) == 0x01 and gf_mul(3, 7) == 9
    for a in (1, 2, 0x53, 0xFF):
        inv = _EXP[(255 - _LOG[a]) % 255]
        assert gf_mul(a, inv) == 1


def xor(bufs: list[bytes]) -> bytes:
    acc = 0
    for b in bufs:
        acc ^= int.from_bytes(b, "little")
    return acc.to_bytes(len(bufs[0]), "little")


def syndrome_q(bufs: list[bytes]) -> bytes:
    """Q = sum over i of g^i * D_i (g = {02})."""
    return xor([b.translate(MUL[_EXP[i]]) for i, b in enumerate(bufs)])


# ---------------------------------------------------------------------------- md's layouts


def raid5_row(layout: str, n: int, row: int) -> tuple[int, list[int]]:
    """md's raid5_compute_sector, level 5: (parity disk, data disks in logical order)."""
    data = n - 1
    if layout in ("left-asymmetric", "left-symmetric"):
        pd = data - row % n
    else:
        pd = row % n
    if layout.endswith("asymmetric"):
        dd = [k + 1 if k >= pd else k for k in range(data)]
    else:
        dd = [(pd + 1 + k) % n for k in range(data)]
    return pd, dd


def raid6_row(layout: str, n: int, row: int) -> tuple[int, int, list[int], list[int]]:
    """md's raid5_compute_sector, level 6: (P disk, Q disk, data disks in logical order,
    data disks in syndrome order). The syndrome order is md's raid6_d0/raid6_next_disk walk:
    from the disk after Q (disk 0 when Q is the last disk) round the array, skipping P and Q."""
    data = n - 2
    if layout in ("left-asymmetric", "left-symmetric"):
        pd = n - 1 - row % n
    else:
        pd = row % n
    if layout.endswith("asymmetric"):
        qd = pd + 1
        if pd == n - 1:
            dd = [k + 1 for k in range(data)]  # Q D D D P
            qd = 0
        else:
            dd = [k + 2 if k >= pd else k for k in range(data)]  # D D P Q D
    else:
        qd = (pd + 1) % n
        dd = [(pd + 2 + k) % n for k in range(data)]
    d0 = 0 if qd == n - 1 else qd + 1
    walk = [(d0 + j) % n for j in range(n)]
    syn = [d for d in walk if d not in (pd, qd)]
    return pd, qd, dd, syn


def test_md_tables_by_hand() -> None:
    # left-symmetric RAID-5 of 5 (md's default): parity walks left, data starts after it.
    assert raid5_row("left-symmetric", 5, 0) == (4, [0, 1, 2, 3])
    assert raid5_row("left-symmetric", 5, 1) == (3, [4, 0, 1, 2])
    assert raid5_row("left-asymmetric", 5, 1) == (3, [0, 1, 2, 4])
    assert raid5_row("right-asymmetric", 5, 1) == (1, [0, 2, 3, 4])
    assert raid5_row("right-symmetric", 5, 1) == (1, [2, 3, 4, 0])
    assert raid6_row("left-symmetric", 5, 0) == (4, 0, [1, 2, 3], [1, 2, 3])
    assert raid6_row("left-symmetric", 5, 2) == (2, 3, [4, 0, 1], [4, 0, 1])
    assert raid6_row("left-asymmetric", 5, 0) == (4, 0, [1, 2, 3], [1, 2, 3])
    assert raid6_row("left-asymmetric", 5, 2) == (2, 3, [0, 1, 4], [4, 0, 1])


def expected_members(level: str, layout: str, n: int, image: bytes) -> list[list[tuple[str, bytes]]]:
    """Per member, per row: (what the chunk is, its expected bytes)."""
    members: list[list[tuple[str, bytes]]] = [[("?", b"")] * ROWS for _ in range(n)]

    def chunk(c: int) -> bytes:
        return image[c * CHUNK : (c + 1) * CHUNK]

    if level == "raid0":
        for c in range(n * ROWS):
            members[c % n][c // n] = (f"data chunk {c}", chunk(c))
    elif level == "raid1":
        for c in range(ROWS):
            for d in range(n):
                members[d][c] = (f"copy of chunk {c}", chunk(c))
    elif level == "raid10":
        # md raid10 "near 2": chunk c's copies are the virtual positions 2c and 2c+1 of a
        # sequence laid row by row over the disks.
        for c in range(n // 2 * ROWS):
            for j in range(2):
                v = 2 * c + j
                members[v % n][v // n] = (f"copy {j} of chunk {c}", chunk(c))
    elif level == "raid5":
        for row in range(ROWS):
            pd, dd = raid5_row(layout, n, row)
            bufs = [chunk(row * (n - 1) + k) for k in range(n - 1)]
            for k, d in enumerate(dd):
                members[d][row] = (f"data chunk {row * (n - 1) + k}", bufs[k])
            members[pd][row] = ("P", xor(bufs))
    elif level == "raid6":
        for row in range(ROWS):
            pd, qd, dd, syn = raid6_row(layout, n, row)
            bufs = {d: chunk(row * (n - 2) + k) for k, d in enumerate(dd)}
            for k, d in enumerate(dd):
                members[d][row] = (f"data chunk {row * (n - 2) + k}", bufs[d])
            members[pd][row] = ("P", xor(list(bufs.values())))
            members[qd][row] = ("Q", syndrome_q([bufs[d] for d in syn]))
    else:  # pragma: no cover
        raise AssertionError(level)
    for d in range(n):
        assert all(what != "?" for what, _ in members[d]), (level, layout, d)
    return members


# md computes RAID-6 Q over the data disks in its raid6_d0 walk (from the disk after Q round
# the array), which for the asymmetric layouts is not the logical chunk order when P and Q
# sit in the middle of the row: the asymmetric cases check the store follows md's walk.
CASES = [
    pytest.param("raid5", "left-asymmetric", 5, id="raid5-left-asymmetric-5"),
    pytest.param("raid5", "right-asymmetric", 5, id="raid5-right-asymmetric-5"),
    pytest.param("raid5", "left-symmetric", 5, id="raid5-left-symmetric-5"),
    pytest.param("raid5", "right-symmetric", 5, id="raid5-right-symmetric-5"),
    pytest.param("raid5", "left-symmetric", 3, id="raid5-left-symmetric-3"),
    pytest.param("raid6", "left-symmetric", 6, id="raid6-left-symmetric-6"),
    pytest.param("raid6", "right-symmetric", 5, id="raid6-right-symmetric-5"),
    pytest.param("raid6", "left-asymmetric", 6, id="raid6-left-asymmetric-6"),
    pytest.param("raid6", "right-asymmetric", 5, id="raid6-right-asymmetric-5"),
    pytest.param("raid0", None, 4, id="raid0-4"),
    pytest.param("raid1", None, 3, id="raid1-3"),
    pytest.param("raid10", None, 4, id="raid10-4"),
    pytest.param("raid10", None, 6, id="raid10-6"),
]


@pytest.mark.parametrize("level, layout, n", CASES)
def test_layout_matches_md(tmp_path: Path, store_servers: ServerPool, level: str, layout: str | None, n: int) -> None:  # noqa: F811
    require_tools("nbdcopy", "qemu-io")
    d = tmp_path / "arr"
    out = create_array(d, level, n, size="1MiB", chunk="64KiB", layout=layout)
    data_disks = {"raid0": n, "raid1": 1, "raid10": n // 2, "raid5": n - 1, "raid6": n - 2}[level]
    size = data_disks * MEMBER
    assert out["size_bytes"] == size and out["data_offset_bytes"] == DATA_OFFSET
    if layout:
        assert out["layout"] == layout

    image = bytearray(random_file(tmp_path / "image", size, seed=n * 1000 + len(level) + len(layout or "")))
    srv = store_servers.start(d)
    tool_ok(["nbdcopy", str(tmp_path / "image"), srv.uri])
    # Then partial-stripe writes (read-modify-write / reconstruct-write paths): 4 KiB-aligned
    # pieces inside a chunk, straddling chunks and straddling rows.
    pieces = [(4 * KiB, 8 * KiB), (CHUNK - 4 * KiB, 12 * KiB), (3 * CHUNK + 20 * KiB, CHUNK + 8 * KiB), (size - 16 * KiB, 16 * KiB)]
    for i, (off, ln) in enumerate(pieces):
        src = tmp_path / f"piece{i}"
        image[off : off + ln] = random_file(src, ln, seed=77 + i)
        qemu_io(srv.uri, f"write -s {src} {off} {ln}")
    assert status(d)["state"] in ("clean", "active")
    srv.stop()
    assert examine(d)["clean"] is True

    expect = expected_members(level, layout or "", n, bytes(image))
    bad: list[str] = []
    for disk in range(n):
        raw = (d / f"disk{disk}").read_bytes()
        assert len(raw) == DATA_OFFSET + MEMBER
        assert raw[:4096] == bytes(4096), f"disk{disk}: bytes 0..4096 are not zero"
        assert raw[12352:DATA_OFFSET] == bytes(DATA_OFFSET - 12352), f"disk{disk}: data below data_offset"
        for row in range(ROWS):
            what, want = expect[disk][row]
            got = raw[DATA_OFFSET + row * CHUNK : DATA_OFFSET + (row + 1) * CHUNK]
            if got != want:
                bad.append(f"disk{disk} row {row}: expected {what}")
    assert not bad, f"{len(bad)} chunk(s) differ from md's layout: " + "; ".join(bad[:12])
