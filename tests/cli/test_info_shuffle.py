"""`recio info --shuffle` on an identity-sorted face file, and recio's default order on it."""

import numpy as np

from recio import ImageRecordIter
from recio.cli.main import main
from recio.sampling.identity_mix import mix_figures, order_of

from ..faces import write_faces

SIZES = [25] * 160  # 4,000 images of 160 identities, sorted by identity


def test_info_prints_each_orders_mixing(tmp_path, capsys):
    faces = write_faces(tmp_path, class_sizes=SIZES, size=8)
    args = ["info", faces.rec, "--shuffle", "global,block-16,buffer-512,none", "--batch-size", "64"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "batches of 64 over 4000 samples of 160 identities" in out
    rows = {line.split()[0]: line.split() for line in out.splitlines()[-4:]}
    assert list(rows) == ["global", "block-16", "buffer-512", "none"]
    assert float(rows["global"][1]) > 1.5 * float(rows["block-16"][1])  # the file is sorted
    assert float(rows["none"][1]) < 4


def test_the_default_order_mixes_identities_as_a_global_shuffle(tmp_path):
    """ImageRecordIter's default shuffle, measured from its batches' labels."""
    faces = write_faces(tmp_path, class_sizes=SIZES, size=8)
    it = ImageRecordIter(faces.rec, data_shape=(3, 8, 8), batch_size=64, shuffle=True)
    labels = np.concatenate([b.label[: len(b.label) - b.pad] for b in it]).astype(np.int64)
    it.close()
    whole = len(labels) // 64 * 64
    default = mix_figures(labels[:whole], np.arange(whole), 64, "default")
    classes = faces.classes()
    best = mix_figures(classes, order_of("global", len(classes), seed=7), 64, "global")
    assert abs(default.distinct_mean - best.distinct_mean) <= 0.05 * best.distinct_mean
    assert abs(default.top_share_mean - best.top_share_mean) <= 0.05 * best.top_share_mean


def test_a_plain_files_classes_are_its_first_labels(tmp_path, capsys):
    faces = write_faces(tmp_path, class_sizes=[3, 5, 2], header=False, size=8)
    assert main(["info", faces.rec, "--shuffle", "none", "--batch-size", "5"]) == 0
    out = capsys.readouterr().out
    assert "batches of 5 over 10 samples of 3 identities" in out
    # batches [0 0 0 1 1], [1 1 1 2 2]: 2 identities each, the largest 3 of 5
    assert out.splitlines()[-1].split() == ["none", "2.0", "2", "60.0%", "60.0%"]
