"""`recio bench` on the default sample: it builds it, prints the verdict, writes JSON."""

import json

from recio.cli import main as cli


def test_cli_default_sample(tmp_path, capsys):
    out = tmp_path / "b.json"
    assert (
        cli(
            [
                "bench",
                "--num-images",
                "24",
                "--batch-size",
                "8",
                "--shape",
                "3,48,48",
                "--seconds",
                "0.1",
                "--repeats",
                "1",
                "--json",
                str(out),
            ]
        )
        == 0
    )
    text = capsys.readouterr().out
    assert "built the sample dataset" in text and "verdict:" in text
    assert json.loads(out.read_text())["data"]["records"] == 24
