"""Build of the C extension `recio._native` (sources under native/).

The extension links the libjpeg API of the system's libjpeg-turbo (Debian:
libjpeg62-turbo-dev); it does not use TurboJPEG (libturbojpeg is PyTurboJPEG's, on
the Python side). Overrides for packagers:
RECIO_JPEG_PREFIX (include/ and lib/ below it), RECIO_NATIVE_DEBUG=asan
(AddressSanitizer + UndefinedBehaviorSanitizer, -O1 -g), RECIO_NO_NATIVE=1
(skip the extension; recio then runs on its Python fallback).
"""

import os
import sys
from pathlib import Path

from setuptools import Extension, setup

NATIVE = Path("native")


def native_extension() -> Extension:
    include_dirs, library_dirs = [], []
    prefix = os.environ.get("RECIO_JPEG_PREFIX")
    if prefix:
        include_dirs.append(os.path.join(prefix, "include"))
        library_dirs.append(os.path.join(prefix, "lib"))
    compile_args = ["-O3", "-std=c11", "-Wall", "-Wextra", "-Wno-unused-parameter", "-pthread"]
    link_args = ["-pthread"]
    if os.environ.get("RECIO_NATIVE_DEBUG") == "asan":
        sanitize = "-fsanitize=address,undefined"
        compile_args = [a for a in compile_args if a != "-O3"]
        compile_args += ["-O1", "-g", "-fno-omit-frame-pointer", sanitize]
        link_args += [sanitize]
    return Extension(
        "recio._native",
        sources=sorted(str(p) for p in NATIVE.glob("*.c")),
        depends=sorted(str(p) for p in NATIVE.glob("*.h")),
        include_dirs=include_dirs,
        library_dirs=library_dirs,
        libraries=["jpeg"],
        extra_compile_args=compile_args,
        extra_link_args=link_args,
    )


ext_modules = [] if os.environ.get("RECIO_NO_NATIVE") == "1" else [native_extension()]
if sys.platform == "win32":  # pthreads and libjpeg-turbo from the system: POSIX only
    ext_modules = []

setup(ext_modules=ext_modules)
