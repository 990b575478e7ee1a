"""The code in README.md and docs/*.md runs as written (tests/docs_pages.py says how).

Each page runs in a directory of its own holding the sample data the pages name, made as
the pages tell a reader to make it: ``images/`` (an image folder of three classes) and
``faces/`` (a folder per identity) by ``recio sample``, and ``data/train`` and ``data/val``
made from ``images/`` with the README's own im2rec commands. The README makes all of its
data itself.
"""

from __future__ import annotations

import importlib.util
import re
import shutil
from pathlib import Path

import pytest

from . import docs_pages
from ._paths import REPO

PAGES = ["README.md", *sorted(p.relative_to(REPO).as_posix() for p in REPO.glob("docs/*.md"))]
MADE_BY_THE_PAGE = {"README.md": ()}  # the rest get images/, faces/, data/train and data/val


def _im2rec(*args: str) -> None:
    from recio.im2rec.cli import main

    assert main(list(args)) == 0


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sample data every page may name, made once: copied into each page's directory."""
    root = tmp_path_factory.mktemp("docs-sample")
    from recio.cli.main import main

    assert main(["sample", str(root)]) == 0  # what the pages tell a reader to run
    (root / "data").mkdir()
    for stem in ("train", "val"):  # README's commands
        _im2rec("--list", "--recursive", "--quiet", f"{root}/data/{stem}", f"{root}/images")
        _im2rec("--resize", "64", "--quiet", f"{root}/data/{stem}", f"{root}/images")
    return root


def _page_dir(sample: Path, page: str, tmp_path: Path) -> Path:
    for name in MADE_BY_THE_PAGE.get(page, ("images", "faces", "data")):
        shutil.copytree(sample / name, tmp_path / name)
    return tmp_path


# what a page's code imports -> the module that must be installed for it, and its extra
EXTRAS = {
    "torch": ("torch", "train"),
    "lightning": ("lightning", "frameworks"),
    "torchdata": ("torchdata", "frameworks"),
    "recio.dali": ("nvidia.dali", "dali"),
    "recio.gpu": ("torch", "gpu"),
}


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ImportError:  # a parent package is missing (nvidia)
        return False


def _marked(page: str):
    """The page's pytest param: marked with the servers it reads from (and ``dali``), and
    skipped where an extra its code imports is not installed (as conftest's needs_torch)."""
    text = (REPO / page).read_text()
    marks = [getattr(pytest.mark, s) for s in docs_pages.SERVERS.get(page, ())]
    needs = {name for name in EXTRAS if re.search(rf"^(import|from) {name}\b", text, re.M)}
    if "recio.dali" in needs:
        marks.append(pytest.mark.dali)
    if re.search(r"^recio train ", text, re.M):
        needs.add("torch")
    for name in sorted(needs):
        module, extra = EXTRAS[name]
        if not _installed(module):
            marks.append(pytest.mark.skip(reason=f"needs {module} (the {extra} extra)"))
    return pytest.param(page, marks=marks)


def _server_env(page: str, request: pytest.FixtureRequest) -> dict[str, str]:
    """The test servers a page reads from, named as a reader's own store would be."""
    env = {}
    servers = docs_pages.SERVERS.get(page, ())
    if "s3" in servers:
        s3 = request.getfixturevalue("s3_server")
        env["AWS_ENDPOINT_URL"] = s3["endpoint_url"]
        env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"] = s3["key"], s3["secret"]
    if "hdfs" in servers:
        env["HDFS_URL"] = request.getfixturevalue("hdfs_prefix")
    return env


@pytest.mark.parametrize("page", [_marked(p) for p in PAGES])
def test_page_runs_as_written(page, sample, tmp_path, request):
    text = (REPO / page).read_text()
    env = _server_env(page, request)
    proc = docs_pages.run_page(page, text, _page_dir(sample, page, tmp_path), env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    ran = [line for line in proc.stdout.splitlines() if line.startswith("docs: ")]
    assert len(ran) == len(docs_pages.plan(page, text))  # every step reached


def test_readme_quickstart_runs_and_is_not_skipped():
    steps = docs_pages.plan("README.md", (REPO / "README.md").read_text())
    kinds = [s.kind for s in steps if s.kind != "skip"]
    assert kinds[:2] == ["shell", "python"]  # im2rec, then the training loop and DataLoader
    assert any(w[:2] == ["recio", "im2rec"] for s in steps for w in s.commands or [])


def test_readme_commands_are_what_make_and_ci_run():
    """README's two commands name the scripts that exist, that `make` runs, and (the test
    command) that CI runs."""
    readme = docs_pages.blocks("README.md", (REPO / "README.md").read_text())
    commands = [b.text.strip() for b in readme if b.text.startswith("bash tools/run_")]
    assert commands == ["bash tools/run_demo.sh", "bash tools/run_tests.sh"]
    for command in commands:
        assert (REPO / command.split()[1]).is_file()
    make = (REPO / "Makefile").read_text()
    assert "demo:\n\tbash tools/run_demo.sh" in make and "test:\n\tbash tools/run_tests.sh" in make
    ci = [ln for ln in (REPO / ".ci" / "run").read_text().splitlines() if not ln.startswith("#")]
    assert "bash tools/run_tests.sh" in ci


# what a page's code reads of the sample data
SAMPLE_PATHS = re.compile(r"\b(images/|faces/|data/(train|val)\b)")


@pytest.mark.parametrize("page", PAGES)
def test_a_page_says_how_to_make_the_data_it_reads(page):
    """A page that reads the sample data runs `recio sample` or says so in its first lines."""
    text = (REPO / page).read_text()
    code = "\n".join(b.text for b in docs_pages.blocks(page, text))
    if not SAMPLE_PATHS.search(code):
        return
    ran = any(w[:2] == ["recio", "sample"] for s in docs_pages.plan(page, text)
              for w in s.commands or [])  # fmt: skip
    assert ran or "recio sample" in "\n".join(text.splitlines()[:12]), page


def test_every_listed_block_exists():
    """NOT_RUN, TORCHRUN and CHECKS name blocks that are there (no stale entries)."""
    keys = {b.key for page in PAGES for b in docs_pages.blocks(page, (REPO / page).read_text())}
    listed = set(docs_pages.NOT_RUN) | docs_pages.TORCHRUN | set(docs_pages.CHECKS)
    assert sorted(listed - keys) == []
    assert set(docs_pages.SERVERS) <= set(PAGES)


# ---- the harness itself fails where a reader would ----

GOOD = """# A page

```sh
mkdir -p out
```

```python
x = 2
```

Text between blocks.

```python
assert x * 21 == 42  # builds on the block before
import os
assert os.path.isdir("out")
```
"""


def test_harness_runs_a_good_page(tmp_path):
    proc = docs_pages.run_page("good.md", GOOD, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "docs: good.md:8 (python)" in proc.stdout and "docs: good.md:14 (python)" in proc.stdout


@pytest.mark.parametrize(
    "broken, line",
    [
        ("x = 2", "x = undefined_name"),  # a name the block never defined
        ("assert x * 21 == 42", "assert x * 21 == 43"),  # a wrong claim
        ("import os", "from recio import NoSuchThing"),  # an import that is not there
    ],
)
def test_harness_fails_on_a_broken_block(broken, line, tmp_path):
    proc = docs_pages.run_page("broken.md", GOOD.replace(broken, line), tmp_path)
    assert proc.returncode == 1
    assert "docs: the block at broken.md:" in proc.stderr


def test_harness_fails_on_a_failing_recio_command(tmp_path):
    page = "```console\n$ recio info missing/train.rec\nfile  missing/train.rec\n```\n"
    assert docs_pages.plan("cli.md", page)[0].commands == [["recio", "info", "missing/train.rec"]]
    proc = docs_pages.run_page("cli.md", page, tmp_path)
    assert proc.returncode == 1 and "docs: the block at cli.md:2 failed" in proc.stderr
    assert "no such file" in proc.stderr.lower() or "missing/train.rec" in proc.stderr


def test_a_block_that_cannot_run_must_be_listed():
    page = "```bash\npip install something\n```\n"
    with pytest.raises(ValueError, match="new.md:2: a bash block that the docs test cannot run"):
        docs_pages.plan("new.md", page)
    assert docs_pages.shell_commands("recio info a.rec | head") is None
    assert docs_pages.shell_commands("recio im2rec \\\n  --list p r  # note") == [
        ["recio", "im2rec", "--list", "p", "r"]
    ]


def test_a_readme_block_broken_fails_its_page(sample, tmp_path):
    """The README's quickstart with one name changed: the page's test fails, naming it."""
    text = (REPO / "README.md").read_text().replace("RecordDataset.collate", "RecordDataset.nope")
    assert text != (REPO / "README.md").read_text()
    proc = docs_pages.run_page("README.md", text, _page_dir(sample, "README.md", tmp_path))
    assert proc.returncode == 1 and "docs: the block at README.md:" in proc.stderr
    assert "nope" in proc.stderr
