"""Run the code blocks of a documentation page as a reader would: in order, as written.

A page's fenced blocks become steps: a ```python block is executed in one namespace shared
by the page's python blocks (a later block builds on an earlier one); a shell block
(```sh, ```bash, ```shell, ```console) whose every command is ``recio ...`` or ``mkdir -p``
runs those commands (``recio`` as ``python -m recio.cli``, the entry point's module); a
python block named in ``TORCHRUN`` runs on its own as a script under torchrun, two
processes. Any other shell block must be listed in ``NOT_RUN`` with the reason, keyed by the
page and the block's first line, so a new block that does not run fails the docs test rather
than going unchecked. ``CHECKS`` adds assertions after a block (in its namespace) where the
block shows a result without asserting it.

``run_page`` runs a page's steps in a fresh Python process (``python -m tests.docs_pages``)
in a working directory the caller filled with the data the page names; a failing step stops
the page and names the page and the block's line.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import traceback
from dataclasses import asdict, dataclass
from pathlib import Path

from ._paths import REPO

SHELL = {"sh", "bash", "shell", "console"}
FENCE = re.compile(r"^```([\w-]*)[^\n]*\n(.*?)^```[ \t]*$", re.M | re.S)

# (page, first line of the block) -> why the docs test does not run it.
NOT_RUN: dict[tuple[str, str], str] = {
    ("README.md", "bash tools/setup.sh"): "installs with apt and pip (CI runs it on a clean clone)",
    ("README.md", "bash tools/run_demo.sh"): "installs into .venv with pip and apt (CI runs it)",
    ("README.md", "bash tools/run_tests.sh"): "the whole suite: it is what CI runs",
    ("docs/install.md", "bash tools/setup.sh s3,hdfs"): "installs with pip and apt",
    ("docs/install.md", "python3 -m venv .venv && . .venv/bin/activate"): "installs with pip",
    ("docs/install.md", ".venv/bin/pip wheel --no-deps -w dist ."): "builds and installs a wheel",
    ("docs/install.md", "cibuildwheel --platform linux"): "needs Docker",
    ("docs/im2rec.md", "pip install -e '.[cluster]'"): (
        "installs with pip; a Dask cluster of worker processes (tests/im2rec/test_engine.py "
        "runs --engine dask)"
    ),
    ("docs/development.md", "tools/ci_services.sh start"): (
        "starts the test servers, which the suite's s3/hdfs tests do (tests/test_servers.py)"
    ),
    ("docs/development.md", "ruff check . && ruff format --check ."): (
        "the lint, which tests/test_lint.py runs"
    ),
    ("docs/development.md", "RECIO_SERVERS_PORTS=auto RECIO_SERVERS_OWNER=me \\"): (
        "starts the test servers (tests/test_servers.py)"
    ),
    ("docs/dali.md", "tools/dali_gpu_check.sh CORPUS_DIR"): "needs a GPU machine and DALI wheels",
    ("docs/gpu.md", "tools/gpu_check.sh --build"): "builds a wheel (tests/tools/test_gpu_check.py)",
    ("docs/gpu.md", "OUT=/tmp/out tools/gpu_check.sh"): "needs a GPU machine",
    ("docs/gpu.md", "tools/gpu_check.sh --dry-run"): "about 3 minutes: CI runs it (.ci/run)",
    ("docs/optimize.md", "recio optimize 'data/train-*-of-00008.rec' data/optimized/"): (
        "shards and a bucket the page does not make (tests/im2rec/test_optimize.py optimizes "
        "shards into a folder and memory:// URLs)"
    ),
    ("docs/train.md", "torchrun --nproc-per-node 2 -m recio.train data/train.rec --epochs 1"): (
        "runs as a test of its own (tests/train: the DDP run under torchrun)"
    ),
    ("docs/bench.md", "recio bench"): "about 30 s even on a small sample (tests/bench runs it)",
    ("docs/errors.md", "python -W error::recio.errors.IndexWarning train.py"): (
        "names a training script of the reader's own"
    ),
}

# page -> the test servers its blocks read from: the page runs with AWS_ENDPOINT_URL,
# AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY set to the S3 test server's ("s3"), and
# HDFS_URL naming a fresh folder on the HDFS test server ("hdfs").
SERVERS: dict[str, tuple[str, ...]] = {
    "docs/storage.md": ("s3", "hdfs"),
}

# (page, first line of a python block) -> run alone under torchrun, 2 processes.
TORCHRUN: set[tuple[str, str]] = {
    ("docs/faces.md", "import torch.distributed as dist"),
}

# (page, first line of a python block) -> Python run after it in the page's namespace.
CHECKS: dict[tuple[str, str], str] = {
    ("docs/frameworks.md", "import lightning as L"): (  # one batch from the DataModule
        "d = Data()\nd.setup('fit')\nloader = d.train_dataloader()\nb = next(iter(loader))\n"
        "assert len(loader) == 1 and b.data.shape == (32, 3, 224, 224) and b.pad == 20\n"
        "assert b.label.dtype == torch.long and sorted(b.index[:12].tolist()) == list(range(12))\n"
        "loader.close()\n"
    ),
    ("docs/iterator.md", "import torch"): (
        "assert state['epoch'] == 3 and it.stats.decoded == 3 * 12\n"
        "assert x.shape == (32, 3, 224, 224)\n"
    ),
    ("README.md", "import torch"): (
        "assert batch.data.shape == (8, 3, 224, 224) and batch.data.dtype == 'float32'\n"
        "assert it.stats.decoded == 2 * 12 and images.shape[1:] == (3, 224, 224)\n"
        "assert len(ds) == 12 and str(labels.dtype) == 'torch.int64'\n"
    ),
}


@dataclass
class Block:
    """One fenced block of a page: its language, first line number and text."""

    page: str
    lang: str
    line: int
    text: str

    @property
    def key(self) -> tuple[str, str]:
        first = next((ln.strip() for ln in self.text.splitlines() if ln.strip()), "")
        return self.page, re.sub(r"\s+#.*$", "", first)  # a trailing comment may change


@dataclass
class Step:
    """What running a block means: ``kind`` python, torchrun, shell (``commands``) or skip."""

    page: str
    line: int
    kind: str
    code: str = ""
    commands: list[list[str]] | None = None
    why: str = ""


def blocks(page: str, text: str) -> list[Block]:
    """The fenced code blocks of a page, in order."""
    found = []
    for m in FENCE.finditer(text):
        line = text.count("\n", 0, m.start()) + 2  # the first line inside the fence
        found.append(Block(page, m.group(1).lower(), line, m.group(2)))
    return found


def shell_commands(text: str, console: bool = False) -> list[list[str]] | None:
    """A shell block's commands as argument lists, or None where one is not ``recio ...`` or
    ``mkdir -p ...`` (or uses the shell beyond words: pipes, redirections, variables). In a
    ``console`` block only the lines after a ``$`` prompt are commands; the rest is output."""
    joined = re.sub(r"\\\n", " ", text)
    commands = []
    for raw in joined.splitlines():
        raw = raw.strip()
        if console and not raw.startswith("$ "):
            continue
        raw = raw.removeprefix("$ ")
        if not raw or raw.startswith("#"):
            continue
        words = shlex.split(raw, comments=True)
        if any(w in ("|", ">", "<", "&&", ";", "||") or "$" in w for w in words):
            return None
        if words[:1] == ["recio"] or words[:2] == ["mkdir", "-p"]:
            commands.append(words)
        else:
            return None
    return commands


def plan(page: str, text: str) -> list[Step]:
    """The steps of a page; raises ValueError for a block that neither runs nor is listed."""
    steps = []
    for b in blocks(page, text):
        if b.key in NOT_RUN:
            steps.append(Step(page, b.line, "skip", why=NOT_RUN[b.key]))
        elif b.lang == "python":
            kind = "torchrun" if b.key in TORCHRUN else "python"
            steps.append(Step(page, b.line, kind, code=b.text + CHECKS.get(b.key, "")))
        elif b.lang in SHELL:
            commands = shell_commands(b.text, console=b.lang == "console")
            if commands is None:
                raise ValueError(
                    f"{page}:{b.line}: a {b.lang} block that the docs test cannot run "
                    f"({b.key[1]!r}): make it recio commands, or list it in NOT_RUN with why"
                )
            steps.append(Step(page, b.line, "shell", commands=commands))
        # other languages (text, json, none) are output or data, not code to run
    return steps


def run_page(
    page: str, text: str, workdir: Path, env: dict[str, str] | None = None, timeout: float = 600
) -> subprocess.CompletedProcess:
    """Every step of ``page`` in order, in a fresh Python process working in ``workdir``."""
    steps = plan(page, text)
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump([asdict(s) for s in steps], f)
    try:
        return subprocess.run(
            [sys.executable, "-m", "tests.docs_pages", f.name],
            cwd=workdir, env=page_env(env), capture_output=True, text=True, timeout=timeout,
        )  # fmt: skip
    finally:
        os.unlink(f.name)


def page_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment a page runs in: this checkout's recio, one OpenMP thread."""
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path, "OMP_NUM_THREADS": "1", **(extra or {})}


def _run_shell(step: Step) -> None:
    for words in step.commands or []:
        if words[0] == "mkdir":
            for folder in words[2:]:
                os.makedirs(folder, exist_ok=True)
            continue
        proc = subprocess.run([sys.executable, "-m", "recio.cli", *words[1:]], text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"`{shlex.join(words)}` exited with {proc.returncode}")


def _run_torchrun(step: Step) -> None:
    from ._train_data import torchrun

    script = Path(f"_block_{step.line}.py").resolve()
    script.write_text(step.code)
    proc = torchrun([str(script)], timeout=300, cwd=os.getcwd())
    print(proc.stdout, end="")


def main(steps_file: str) -> int:
    namespace: dict = {"__name__": "__main__"}
    for raw in json.loads(Path(steps_file).read_text()):
        step = Step(**raw)
        where = f"{step.page}:{step.line}"
        if step.kind == "skip":
            print(f"docs: {where} not run: {step.why}", flush=True)
            continue
        print(f"docs: {where} ({step.kind})", flush=True)
        try:
            if step.kind == "python":
                exec(compile(step.code, where, "exec"), namespace)
            elif step.kind == "shell":
                _run_shell(step)
            else:
                _run_torchrun(step)
        except BaseException:
            traceback.print_exc()
            print(f"docs: the block at {where} failed", file=sys.stderr, flush=True)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
