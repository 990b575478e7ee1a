"""What a failed ``recio`` command leaves on stderr."""


def one_line_error(capsys, *words):
    """The error: one line on stderr, no traceback, holding each of ``words``."""
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    assert "Traceback" not in err
    for word in words:
        assert word in err, err
    return err
