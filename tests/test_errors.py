"""recio's exceptions."""

from recio.errors import RecordIOError


def test_errors_are_value_errors():
    assert issubclass(RecordIOError, ValueError)


# ---- the common mistakes: one sentence naming the file (or the parameter) and the fix ----


def _small_rec(folder) -> str:
    import io

    from PIL import Image

    from recio.records.recordio import IRHeader, MXIndexedRecordIO, pack

    image = io.BytesIO()
    Image.new("RGB", (8, 8)).save(image, "JPEG")
    rec = str(folder / "g.rec")
    with MXIndexedRecordIO(str(folder / "g.idx"), rec, "w") as w:
        for i in range(4):
            w.write_idx(i, pack(IRHeader(0, 0.0, i, 0), image.getvalue()))
    return rec


def _openers():
    from recio import ImageRecordIter
    from recio.frameworks.dataset import RecordDataset
    from recio.records.shards import open_records

    return {
        "ImageRecordIter": lambda rec, idx=None: ImageRecordIter(
            rec, (3, 8, 8), 2, path_imgidx=idx
        ).close(),
        "RecordDataset": lambda rec, idx=None: len(RecordDataset(rec, (3, 8, 8), path_imgidx=idx)),
        "open_records": lambda rec, idx=None: open_records(rec, idx).close(),
    }


def _one_sentence(exc: BaseException) -> str:
    text = str(exc)
    assert "\n" not in text and text.count(". ") == 0, text
    return text


def test_a_missing_rec_or_idx_is_named_with_the_fix(tmp_path):
    import pytest

    rec = _small_rec(tmp_path)
    missing_rec, missing_idx = str(tmp_path / "nope.rec"), str(tmp_path / "nope.idx")
    for name, open_ in _openers().items():
        with pytest.raises(FileNotFoundError) as info:
            open_(missing_rec)
        text = _one_sentence(info.value)
        assert missing_rec in text and "`recio im2rec`" in text, name
        with pytest.raises(FileNotFoundError) as info:
            open_(rec, missing_idx)
        text = _one_sentence(info.value)
        assert missing_idx in text and f"`recio index {rec}`" in text, name
        assert info.value.filename == missing_idx


def test_a_bad_shape_or_batch_size_says_what_to_give():
    import pytest

    from recio import ImageRecordIter
    from recio.frameworks.dataset import RecordDataset

    for make in (
        lambda shape: ImageRecordIter("x.rec", shape, 2),
        lambda shape: RecordDataset("x.rec", shape),
    ):
        with pytest.raises(ValueError, match=r"give \(3, 224, 224\), not \(224, 224, 3\)"):
            make((224, 224, 3))  # channels last
        for bad in [(3, 0, 8), (8, 8), (1, 8, 8), "3,8,8"]:
            with pytest.raises(ValueError) as info:
                make(bad)
            text = _one_sentence(info.value)
            assert text.startswith("data_shape must be (3, height, width)") and repr(bad) in text
    with pytest.raises(ValueError, match="^batch_size must be at least 1, not 0$"):
        ImageRecordIter("x.rec", (3, 8, 8), 0)
    with pytest.raises(TypeError, match="^batch_size must be an int, not float 2.5$"):
        ImageRecordIter("x.rec", (3, 8, 8), 2.5)
