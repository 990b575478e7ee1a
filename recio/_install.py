"""How to install one of recio's extras, said the same way in every message.

recio is not on PyPI: it is installed from a checkout or from a wheel built from one.
"""


def install_hint(extra: str) -> str:
    """The command that installs ``extra`` (e.g. "s3", "dali", "train")."""
    return (
        f"pip install -e '.[{extra}]' in a recio checkout's virtual environment "
        f"(tools/setup.sh {extra} makes .venv and installs it there; or pip install "
        f"'recio-*.whl[{extra}]' for a wheel built with python -m build)"
    )
