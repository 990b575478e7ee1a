"""The `recio` command: info, verify, index, --version."""

import os
import subprocess
import sys

from recio.cli import main as cli
from recio.format import IRHeader, pack
from recio.reader import RecordFile
from recio.recordio import MXIndexedRecordIO


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


def test_console_script_runs():
    result = subprocess.run(
        [sys.executable, "-m", "recio.cli", "--version"], capture_output=True, text=True
    )
    assert result.returncode == 0 and "recio" in result.stdout
