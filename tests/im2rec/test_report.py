"""The end every run shares (report.reported_run): status, time, the progress bar."""

import pytest

from recio.im2rec.optimize import OptimizeReport
from recio.im2rec.report import PackReport, TooManyErrors, reported_run


class Bar:
    closed = False

    def close(self):
        self.closed = True


@pytest.mark.parametrize("report", [PackReport("a.lst", []), OptimizeReport([], [])])
def test_a_run_that_ends_well_is_complete_timed_and_its_bar_closed(report):
    bar = Bar()
    with reported_run(report) as run:
        assert report.status == "running"
        run.bar = bar
    assert report.status == "complete" and bar.closed and report.seconds >= 0


@pytest.mark.parametrize(
    ("exc", "status"),
    [(KeyboardInterrupt(), "interrupted"), (TooManyErrors("x"), "aborted"), (OSError(), "failed")],
)
def test_a_run_an_exception_ends_says_why_and_the_exception_goes_on(exc, status):
    report, bar = PackReport("a.lst", []), Bar()
    with pytest.raises(type(exc)), reported_run(report) as run:
        run.bar = bar
        raise exc
    assert report.status == status and bar.closed and report.seconds >= 0


def test_a_status_the_run_set_itself_stays():
    report = PackReport("a.lst", [])
    with pytest.raises(ValueError), reported_run(report):
        report.status = "failed"  # some outputs published: pack_list says so itself
        raise ValueError("publishing failed")  # alone, "aborted"
    assert report.status == "failed"
