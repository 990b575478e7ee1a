"""`recio info`, `verify` and `index`: the walk of a .rec, what they say of it, the .idx."""

import os
import re

import pytest

from recio.cli import main as cli
from recio.records.file import RecordFile
from recio.records.format import IRHeader, pack, unpack
from recio.records.recordio import MXIndexedRecordIO

from .errors import one_line_error


def test_cli_info_verify_index(tmp_path, capsys):
    rec, idx = str(tmp_path / "c.rec"), str(tmp_path / "c.idx")
    with MXIndexedRecordIO(idx, rec, "w") as w:
        for i in range(6):
            w.write_idx(i, pack(IRHeader(0, float(i % 3), i, 0), b"img%d" % i))
    assert cli(["info", rec]) == 0
    out = capsys.readouterr().out
    assert "records" in out and "6" in out and "index_agrees" in out and "True" in out
    assert cli(["verify", rec]) == 0
    os.remove(idx)
    assert cli(["index", rec]) == 0
    assert open(idx).read().splitlines() == [
        f"{i}\t{o}" for i, o in enumerate(RecordFile(rec).offsets.tolist())
    ]
    # a wrong .idx is detected by info
    open(idx, "w").write("0\t0\n")
    assert cli(["info", rec]) == 1
    # a corrupt file: verify names the byte offset and exits non-zero
    data = bytearray(open(rec, "rb").read())
    data[40:44] = b"\0\0\0\0"
    open(rec, "wb").write(bytes(data))
    assert cli(["verify", rec]) == 1
    assert "at byte" in capsys.readouterr().out


# --- recio index: header ids as keys, --renumber, --force, --prefix-only --------------------

IDS = [3, 7, 4, 9, 1]  # im2rec writes the .lst index as the header id and as the .idx key


def _write(tmp_path, ids=IDS, payloads=None):
    rec, idx = str(tmp_path / "d.rec"), str(tmp_path / "d.idx")
    with MXIndexedRecordIO(idx, rec, "w") as w:
        for n, i in enumerate(ids):
            payload = payloads[n] if payloads else pack(IRHeader(0, float(i % 3), i, 0), b"x" * i)
            w.write_idx(i, payload)
    return rec, idx


def _idx_lines(idx):
    return open(idx).read().splitlines()


def test_index_keeps_the_header_ids_as_keys(tmp_path, capsys):
    rec, idx = _write(tmp_path)
    written = _idx_lines(idx)
    os.remove(idx)
    assert cli(["index", rec]) == 0
    assert "header ids" in capsys.readouterr().out
    assert _idx_lines(idx) == written
    with MXIndexedRecordIO(idx, rec, "r") as r:
        assert sorted(r.keys) == sorted(IDS)
        for i in IDS:
            header, _ = unpack(r.read_idx(i))
            assert header.id == i


def test_index_renumber_numbers_by_position(tmp_path, capsys):
    rec, idx = _write(tmp_path)
    offsets = [line.split("\t")[1] for line in _idx_lines(idx)]
    os.remove(idx)
    assert cli(["index", "--renumber", rec]) == 0
    assert "by position (--renumber)" in capsys.readouterr().out
    assert _idx_lines(idx) == [f"{k}\t{o}" for k, o in enumerate(offsets)]


def test_index_numbers_by_position_and_says_why(tmp_path, capsys):
    # ids that are not unique (code that packs IRHeader(0, label, 0, 0) for every image)
    rec, idx = _write(tmp_path, ids=[0, 1, 2], payloads=[pack(IRHeader(0, 1.0, 0, 0), b"i")] * 3)
    os.remove(idx)
    assert cli(["index", rec]) == 0
    assert "not unique (id 0 is in 3 records)" in capsys.readouterr().out
    assert [line.split("\t")[0] for line in _idx_lines(idx)] == ["0", "1", "2"]
    # records without an image header (not an image .rec)
    rec, idx = _write(tmp_path, ids=[5, 6], payloads=[b"short", b"also short"])
    os.remove(idx)
    assert cli(["index", rec]) == 0
    assert "record 0 (at byte 0) has no image header" in capsys.readouterr().out
    assert [line.split("\t")[0] for line in _idx_lines(idx)] == ["0", "1"]


def test_index_refuses_to_overwrite_a_valid_idx(tmp_path, capsys):
    rec, idx = _write(tmp_path)
    before = open(idx, "rb").read()
    assert cli(["index", rec]) == 1
    err = one_line_error(capsys, "already exists and agrees", "--force")
    assert "nothing written" in err
    assert open(idx, "rb").read() == before
    # an .idx renumbered by an older `recio index`: the refusal says the keys would change
    open(idx, "w").write("".join(f"{k}\t{line.split()[1]}\n" for k, line in enumerate(
        before.decode().splitlines())))  # fmt: skip
    assert cli(["index", rec]) == 1
    one_line_error(capsys, "its keys differ", "--force")
    assert cli(["index", "--force", rec]) == 0
    assert "replaced the old" in capsys.readouterr().out
    assert open(idx, "rb").read() == before


def test_index_replaces_a_wrong_idx(tmp_path, capsys):
    rec, idx = _write(tmp_path)
    good = open(idx, "rb").read()
    open(idx, "w").write("0\t0\n")
    assert cli(["index", rec]) == 0
    out = capsys.readouterr().out
    assert "replaced the old" in out and "4 records not listed" in out
    assert open(idx, "rb").read() == good


def _truncated(tmp_path):
    """d.rec cut inside its third record; d.idx still lists all five."""
    rec, idx = _write(tmp_path)
    offsets = RecordFile(rec).offsets.tolist()
    data = open(rec, "rb").read()
    open(rec, "wb").write(data[: offsets[2] + 20])
    return rec, idx, offsets, len(data[: offsets[2] + 20])


def test_index_truncated_refuses_then_indexes_the_intact_prefix(tmp_path, capsys):
    rec, idx, offsets, size = _truncated(tmp_path)
    before = open(idx, "rb").read()
    assert cli(["index", rec]) == 1
    one_line_error(capsys, f"{rec} is damaged", f"at byte {offsets[2]} of {rec}", "--prefix-only")
    assert open(idx, "rb").read() == before
    assert cli(["index", "--prefix-only", rec]) == 0
    out = capsys.readouterr().out
    assert "2 records" in out
    assert f"left out: the last {size - offsets[2]} bytes of {rec}" in out
    assert "the old .idx listed 3 records there" in out
    assert _idx_lines(idx) == [f"{IDS[0]}\t{offsets[0]}", f"{IDS[1]}\t{offsets[1]}"]
    with MXIndexedRecordIO(idx, rec, "r") as r:
        assert unpack(r.read_idx(IDS[1]))[0].id == IDS[1]


def test_index_is_written_atomically(tmp_path, monkeypatch):
    rec, idx = _write(tmp_path)
    open(idx, "w").write("0\t0\n")

    def fail(self, data):
        raise OSError("disk full")

    monkeypatch.setattr("recio.storage.AtomicOutput.write", fail)
    assert cli(["index", rec]) == 2
    assert open(idx).read() == "0\t0\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.crc", "d.idx", "d.rec"]


# --- info and verify on a damaged file: what is wrong, offsets in the .rec -------------


def test_info_on_a_truncated_file_reports_the_damage(tmp_path, capsys):
    rec, idx, offsets, size = _truncated(tmp_path)
    assert cli(["info", rec]) == 1
    out = capsys.readouterr().out
    fields = dict(line.split(None, 1) for line in out.splitlines())
    assert fields["records"] == "2"
    assert f"at byte {offsets[2]} of {rec}" in fields["damaged"]
    assert "--prefix-only" in fields["damaged"]
    assert fields["index_agrees"] == "False"
    assert (
        f"past its end ({size} bytes; first: key 9 at byte {offsets[3]} of {rec})"
        in (fields["index_problem"])
    )
    # a byte offset is never said to be in the .idx (it is one of the .rec)
    assert not re.search(r"at byte \d+ of \S*\.idx", out)
    # no .idx at all: the same damage report
    os.remove(idx)
    assert cli(["info", rec]) == 1
    assert f"at byte {offsets[2]} of {rec}" in capsys.readouterr().out


def test_verify_names_the_rec_and_the_first_bad_byte(tmp_path, capsys):
    rec, idx, offsets, size = _truncated(tmp_path)
    assert cli(["verify", rec]) == 1
    out = capsys.readouterr().out
    assert out.startswith(f"FAIL {rec}: ")
    assert f"at byte {offsets[2]} of {rec}" in out and "the 2 complete records" in out
    # corrupt in the middle: a bad magic at the second record
    rec, idx = _write(tmp_path)
    data = bytearray(open(rec, "rb").read())
    data[offsets[1] : offsets[1] + 4] = b"\0\0\0\0"
    open(rec, "wb").write(bytes(data))
    assert cli(["verify", rec]) == 1
    out = capsys.readouterr().out
    assert "bad magic" in out and f"not a record start at byte {offsets[1]} of {rec}" in out
    assert cli(["info", rec]) == 1
    assert f"at byte {offsets[1]} of {rec}" in capsys.readouterr().out


def test_index_and_info_on_a_url(tmp_path, memfs, capsys):
    """The same walk over a remote (ranged-read) source: memory:// here."""
    rec, idx, offsets, size = _truncated(tmp_path)
    memfs.pipe("/m/d.rec", open(rec, "rb").read())
    assert cli(["info", "memory://m/d.rec"]) == 1
    assert f"at byte {offsets[2]} of memory://m/d.rec" in capsys.readouterr().out
    assert cli(["index", "memory://m/d.rec"]) == 1
    capsys.readouterr()
    assert cli(["index", "--prefix-only", "memory://m/d.rec"]) == 0
    assert memfs.cat("/m/d.idx").decode().splitlines() == [
        f"{IDS[0]}\t{offsets[0]}",
        f"{IDS[1]}\t{offsets[1]}",
    ]
    assert cli(["index", "--prefix-only", "memory://m/d.rec"]) == 1
    one_line_error(capsys, "already exists", "--force")


@pytest.mark.parametrize("header", [True, False])
def test_info_shows_the_layout_it_found(tmp_path, capsys, header):
    from tests.faces import write_faces

    face = write_faces(tmp_path, (2, 3), header=header, label_only_at=() if header else (1,))
    assert cli(["info", face.rec]) == 0
    fields = dict(line.split(None, 1) for line in capsys.readouterr().out.splitlines())
    if header:
        assert fields["layout"] == (
            "InsightFace: header record (key 0), 5 images (keys 1..5), "
            "2 identity records (keys 6..7)"
        )
        assert fields["classes"] == "2"
    else:
        assert fields["layout"] == "plain: 5 images, 1 label-only record (not samples)"


def test_info_verify_and_index_share_the_one_walk(tmp_path, monkeypatch, capsys):
    """The three commands walk the .rec with recio.records.scan.walk_records (the walk the
    readers index a file with), and print what it found."""
    import recio.cli.records as commands

    rec, _ = _write(tmp_path)
    with RecordFile(rec) as records:
        offsets = records.offsets.tolist()
    real, calls = commands.walk_records, []

    def spy(source, **kwargs):
        calls.append(kwargs.get("headers", False))
        found = real(source, **kwargs)
        return found._replace(offsets=found.offsets[:2], headers=found.headers[:2])

    monkeypatch.setattr(commands, "walk_records", spy)
    assert cli(["info", rec]) == 1  # two records walked: the .idx lists five
    assert re.search(r"\nrecords +2\n", capsys.readouterr().out)
    assert cli(["verify", rec]) == 0
    assert f"OK {rec}: 2 records" in capsys.readouterr().out
    assert cli(["index", "--force", "--renumber", rec]) == 0
    assert _idx_lines(rec[:-4] + ".idx") == [f"{k}\t{o}" for k, o in enumerate(offsets[:2])]
    assert calls == [True, False, False]  # info reads the headers; verify and index do not


def test_info_describes_the_layout_beside_a_stale_sidecar(tmp_path, capsys):
    """A .rec rewritten by hand beside its old checksum sidecar: info still gives the
    layout (read without checksums) and reports the stale sidecar on a line of its own."""
    rec, idx = _write(tmp_path)
    crc = tmp_path / "d.crc"
    old = crc.read_bytes()
    _write(tmp_path, ids=IDS[:3])  # rewritten: three records, a new sidecar...
    crc.write_bytes(old)  # ...replaced by the old one, of five records
    assert cli(["info", rec]) == 1
    fields = dict(line.split(None, 1) for line in capsys.readouterr().out.splitlines())
    assert fields["layout"] == "plain: 3 images"
    assert fields["checksums"].startswith(f"checksum sidecar {crc} holds 5 checksums")
    assert "verify_checksums=False" in fields["checksums"]
    crc.unlink()
    assert cli(["info", rec]) == 0
    assert "checksums" not in capsys.readouterr().out
