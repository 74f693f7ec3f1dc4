"""The Docker grading image, built here from the host's own Debian Python.

No registry is needed (nor reachable on the machines colbench grades on): the image is
the interpreter that the bwrap sandbox also runs, /usr/bin/python3, with its standard
library, the shared libraries it loads, the libseccomp bindings the server imports, the
third-party libraries graded code may import (runner.OFFERED_MODULES: Debian's numpy and
pandas, with what pandas needs, and the time zone data they read) and just enough /etc
for the `nobody` user. Beside it, a POSIX shell and the core utilities
(Debian's dash and coreutils, Essential packages every Debian system has), so graded
code that shells out behaves as under bwrap, which shows the host's /usr; no setuid bit
survives into the image. It goes to the engine as one tar (`docker import`), so there is
no base image and no build step that could reach out.
"""
from __future__ import annotations

import glob
import io
import json
import os
import subprocess
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from colbench.errors import ColbenchError

from ..runner import LIBRARY_PATH, OFFERED_MODULES
from .base import SANDBOX_PYTHON

DEFAULT_IMAGE = "colbench-grading:latest"
IMAGE_VARIABLE = "COLBENCH_GRADING_IMAGE"
SECCOMP_GLOB = "/usr/lib/python3/dist-packages/seccomp*.so"
NOBODY = 65534
LABEL_PREFIX = "colbench.grading."  # of every label the image carries
# What the image holds beyond the interpreter, recorded in a label: the Docker backend
# refuses an image whose label differs (one built before the offered libraries, say),
# with the command that rebuilds it. Change it whenever the image's contents change.
CONTENTS = "libraries:" + ",".join(OFFERED_MODULES)  # a label value: no spaces
CONTENTS_LABEL = LABEL_PREFIX + "contents"
LIBRARY_PACKAGES = "python3-numpy python3-pandas"  # the Debian packages of OFFERED_MODULES
ZONEINFO = "/usr/share/zoneinfo"  # Debian's pytz and dateutil read the time zones from tzdata

TOOL_PACKAGES = ("dash", "coreutils")
PROGRAM_FOLDERS = ("/bin/", "/usr/bin/")

# Parts of the standard library a grading server never loads: tests, the GUI and pip
# bootstrap, 2to3, and the static libpython and Makefiles for building extensions.
LEFT_OUT = {"test", "idlelib", "tkinter", "turtledemo", "ensurepip", "lib2to3", "venv"}
LEFT_OUT_PREFIXES = ("config-",)


class ImageError(ColbenchError, RuntimeError):
    """The grading image cannot be built or found."""


@dataclass
class ImageInfo:
    tag: str
    id: str
    size: int  # bytes
    labels: dict[str, str]
    created: str

    def as_dict(self) -> dict:
        return {"tag": self.tag, "id": self.id, "size": self.size, "labels": self.labels, "created": self.created}


def configured_image() -> str:
    """The image the Docker backend runs: $COLBENCH_GRADING_IMAGE, else DEFAULT_IMAGE."""
    return os.environ.get(IMAGE_VARIABLE) or DEFAULT_IMAGE


def describe_image(client, tag: str | None = None) -> ImageInfo | None:
    """What the engine knows of the image, or None if it has no such image."""
    import docker

    tag = tag or configured_image()
    try:
        image = client.images.get(tag)
    except docker.errors.ImageNotFound:
        return None
    except docker.errors.APIError as error:  # e.g. not a valid image name
        raise ImageError(f"the engine cannot look up the image {tag}: {error.explanation or error}") from None
    attrs = image.attrs
    labels = (attrs.get("Config") or {}).get("Labels") or {}
    return ImageInfo(tag, image.id, int(attrs.get("Size") or 0), dict(labels), attrs.get("Created", ""))


def build_image(client, tag: str | None = None, on_status: Callable[[str], None] | None = None) -> ImageInfo:
    """Build the grading image from the host's Python and tag it; returns what was built.

    Raises ImageError when the host lacks something the image needs (Debian's python3,
    python3-seccomp, ldd, dpkg) or the engine refuses the tag. A previous image under
    the same tag is removed once nothing names it.
    """
    import docker

    say = on_status or (lambda message: None)
    tag = tag or configured_image()
    repository, version = _split_tag(tag)
    say("looking at the host's Python")
    python = _host_python()
    seccomp = _seccomp_module()
    libraries = _offered_libraries()
    previous = describe_image(client, tag)
    with tempfile.TemporaryDirectory(prefix="colbench-image-") as scratch:
        archive = os.path.join(scratch, "rootfs.tar")
        say("packing the root file system")
        files = _write_rootfs(archive, python, seccomp, libraries)
        megabytes = os.path.getsize(archive) / 1e6
        say(f"importing {files} files ({megabytes:.0f} MB) into the engine as {tag}")
        changes = [f"USER {NOBODY}:{NOBODY}", "WORKDIR /tmp"]
        changes += [f"LABEL {key}={value}" for key, value in _labels(python).items()]
        try:
            client.api.import_image_from_file(archive, repository=repository, tag=version, changes=changes)
        except docker.errors.APIError as error:
            raise ImageError(f"the engine refused the image {tag}: {error.explanation or error}") from None
    built = describe_image(client, tag)
    if built is None:
        raise ImageError(f"the engine accepted the image but has no {tag} afterwards")
    if previous is not None and previous.id != built.id:
        _forget(client, previous.id)
    return built


def _forget(client, image_id: str) -> None:
    """Remove the image the tag moved away from if nothing names it any more, so that
    rebuilds do not pile up. One a container still uses stays (the engine refuses)."""
    import docker

    try:
        if client.images.get(image_id).tags:
            return  # another tag still names it: someone wants it
        client.images.remove(image_id)
    except docker.errors.APIError:
        pass


def _split_tag(tag: str) -> tuple[str, str]:
    """Name and version of a tag; a colon before the last slash is a registry's port."""
    name, colon, version = tag.rpartition(":")
    if not colon or "/" in version:
        return tag, "latest"
    return name, version


def _labels(python: dict) -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    try:
        colbench_version = version("colbench")
    except PackageNotFoundError:
        colbench_version = "unknown"
    return {
        f"{LABEL_PREFIX}source": "host-python",
        f"{LABEL_PREFIX}python": python["version"],
        f"{LABEL_PREFIX}colbench": colbench_version,
        f"{LABEL_PREFIX}built": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        CONTENTS_LABEL: CONTENTS,
    }


def _host_python() -> dict:
    """Where the sandbox interpreter and its library live, asked of the interpreter itself."""
    if not os.path.exists(SANDBOX_PYTHON):
        raise ImageError(
            f"{SANDBOX_PYTHON} is missing: the grading image is built from Debian's python3 (apt-get install python3)"
        )
    probe = (
        "import json, sys, sysconfig; print(json.dumps({'version': '%d.%d.%d' % sys.version_info[:3], "
        "'stdlib': sysconfig.get_path('stdlib'), 'dynload': sysconfig.get_config_var('DESTSHARED')}))"
    )
    done = subprocess.run([SANDBOX_PYTHON, "-I", "-S", "-c", probe], capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        raise ImageError(f"{SANDBOX_PYTHON} does not run: {done.stderr.strip()[-200:]}")
    found = json.loads(done.stdout)
    found["binary"] = os.path.realpath(SANDBOX_PYTHON)
    return found


def _seccomp_module() -> str:
    found = sorted(glob.glob(SECCOMP_GLOB))
    if not found:
        raise ImageError(f"python3-seccomp is not installed (no {SECCOMP_GLOB}): apt-get install python3-seccomp")
    return found[-1]


def _offered_libraries() -> list[str]:
    """The host's folder (or file) of each offered module, under LIBRARY_PATH."""
    found = []
    for name in OFFERED_MODULES:
        candidates = [os.path.join(LIBRARY_PATH, name), os.path.join(LIBRARY_PATH, name + ".py")]
        path = next((c for c in candidates if os.path.exists(c)), None)
        if path is None:
            raise ImageError(
                f"{name} is not in {LIBRARY_PATH}: apt-get install --no-install-recommends {LIBRARY_PACKAGES}"
            )
        found.append(path)
    return found


def _tools() -> list[str]:
    """The programs of TOOL_PACKAGES, as dpkg lists them (/bin/sh among them)."""
    try:
        done = subprocess.run(["dpkg-query", "-L", *TOOL_PACKAGES], capture_output=True, text=True, timeout=60)
    except FileNotFoundError:
        raise ImageError("dpkg-query is missing: the grading image is built on Debian") from None
    if done.returncode != 0:
        raise ImageError(f"cannot list {' and '.join(TOOL_PACKAGES)}: {done.stderr.strip()[-200:]}")
    listed = (line.strip() for line in done.stdout.splitlines())
    return sorted(
        path
        for path in listed
        if path.startswith(PROGRAM_FOLDERS) and os.path.lexists(path) and not os.path.isdir(path)
    )


def _shared_libraries(objects: list[str]) -> set[str]:
    """Every library ldd lists for these binaries, and the dynamic loader."""
    try:
        done = subprocess.run(["ldd", *objects], capture_output=True, text=True, timeout=60)
    except FileNotFoundError:
        raise ImageError("ldd is missing (apt-get install libc-bin)") from None
    libraries = set()
    for line in done.stdout.splitlines():
        line = line.strip()
        if line.endswith(":"):
            continue  # "/usr/bin/python3.11:", the header of each object's list
        if "not found" in line:
            raise ImageError(f"a library of the host's Python is missing: {line}")
        if "=>" in line:
            path = line.split("=>", 1)[1].split("(")[0].strip()
        else:
            path = line.split("(")[0].strip()  # the loader, or linux-vdso (no file)
        if path.startswith("/"):
            libraries.add(path)
    return libraries


def _write_rootfs(archive: str, python: dict, seccomp: str, libraries: list[str]) -> int:
    """Write the image's root file system as a tar; returns how many entries it holds."""
    stdlib, dynload = python["stdlib"], python["dynload"]
    extensions = sorted(glob.glob(os.path.join(dynload, "*.so"))) + [seccomp]
    for library in libraries:
        if os.path.isdir(library):
            found = glob.glob(os.path.join(library, "**", "*.so"), recursive=True)
            extensions += sorted(path for path in found if os.sep + "tests" + os.sep not in path)
    tools = _tools()
    with _RootTar(archive) as root:
        for folder in ("/usr/bin", "/usr/lib", "/etc", "/proc", "/dev", "/sys"):
            root.directory(folder)
        root.directory("/tmp", mode=0o1777)
        root.host_path(python["binary"])
        root.symlink("/usr/bin/python3", os.path.basename(python["binary"]))
        root.host_tree(stdlib, skip=_left_out)
        if not dynload.startswith(stdlib + os.sep):
            root.host_tree(dynload)
        root.host_path(seccomp)
        for library in libraries:
            if os.path.isdir(library):
                root.host_tree(library, skip=_test_suite)  # their own test suites: half their size
            else:
                root.host_path(library)
        if os.path.isdir(ZONEINFO):
            root.host_tree(ZONEINFO)
        for tool in tools:
            root.host_path(tool)
        programs = [tool for tool in tools if not os.path.islink(tool)]
        for library in sorted(_shared_libraries([python["binary"], *extensions, *programs])):
            root.host_path(library)
        root.text("/etc/passwd",
                  f"root:x:0:0:root:/root:/nonexistent\nnobody:x:{NOBODY}:{NOBODY}:nobody:/nonexistent:/nonexistent\n")
        root.text("/etc/group", f"root:x:0:\nnogroup:x:{NOBODY}:\n")
        return root.count


def _test_suite(relative: str) -> bool:
    return os.path.basename(relative) == "tests"


def _left_out(relative: str) -> bool:
    top = relative.split(os.sep, 1)[0]
    return top in LEFT_OUT or top.startswith(LEFT_OUT_PREFIXES)


class _RootTar:
    """A tar of a root file system, owned by root, that copies host files with the
    symlinks on their way (/lib -> usr/lib, libz.so.1 -> libz.so.1.2.13) so that the
    paths ldd and the loader use resolve inside the image as they do here."""

    def __init__(self, path: str):
        self._tar = tarfile.open(path, "w")
        self._names: set[str] = set()
        self.count = 0

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self._tar.close()

    def _add(self, info: tarfile.TarInfo, data=None) -> None:
        info.uid = info.gid = 0
        info.uname = info.gname = "root"
        self._names.add(info.name)
        self._tar.addfile(info, data)
        self.count += 1

    def _has(self, path: str) -> bool:
        return path.lstrip("/") in self._names

    def directory(self, path: str, mode: int = 0o755) -> None:
        parent = os.path.dirname(path)
        if parent != "/" and not self._has(parent):
            self.directory(parent)
        if self._has(path):
            return
        info = tarfile.TarInfo(path.lstrip("/"))
        info.type, info.mode = tarfile.DIRTYPE, mode
        self._add(info)

    def symlink(self, path: str, target: str) -> None:
        if self._has(path):
            return
        self.directory(os.path.dirname(path))
        info = tarfile.TarInfo(path.lstrip("/"))
        info.type, info.linkname, info.mode = tarfile.SYMTYPE, target, 0o777
        self._add(info)

    def text(self, path: str, content: str, mode: int = 0o644) -> None:
        data = content.encode()
        info = tarfile.TarInfo(path.lstrip("/"))
        info.size, info.mode = len(data), mode
        self._add(info, io.BytesIO(data))

    def host_path(self, path: str, _hops: int = 0) -> None:
        """Add a host file under the same path, following (and recording) each symlink."""
        if _hops > 40:
            raise ImageError(f"too many symbolic links on the way to {path}")
        walked = "/"
        parts = Path(path).parts[1:]
        for index, part in enumerate(parts):
            walked = os.path.join(walked, part)
            if os.path.islink(walked):
                target = os.readlink(walked)
                self.symlink(walked, target)
                rest = os.path.join(os.path.dirname(walked), target, *parts[index + 1 :])
                self.host_path(os.path.normpath(rest), _hops + 1)
                return
            if index < len(parts) - 1:
                self.directory(walked)
        if not self._has(walked):
            self._file(walked)

    def host_tree(self, top: str, skip: Callable[[str], bool] = lambda relative: False) -> None:
        self.host_path(top)
        for folder, subfolders, files in os.walk(top):
            relative_folder = os.path.relpath(folder, top)
            subfolders[:] = sorted(
                d for d in subfolders if not skip(os.path.normpath(os.path.join(relative_folder, d)))
            )
            for name in sorted(subfolders) + sorted(files):
                path = os.path.join(folder, name)
                if skip(os.path.normpath(os.path.join(relative_folder, name))) or self._has(path):
                    continue
                if os.path.islink(path):
                    self.symlink(path, os.readlink(path))  # kept as is, even if it dangles here
                elif os.path.isdir(path):
                    self.directory(path, os.stat(path).st_mode & 0o7777)
                else:
                    self._file(path)

    def _file(self, path: str) -> None:
        info = self._tar.gettarinfo(path, arcname=path.lstrip("/"))
        if info.isdir():
            self.directory(path, info.mode)
            return
        if not info.isfile():
            return  # sockets, devices: nothing a Python library needs
        info.mode &= 0o777  # no setuid, setgid or sticky bit on any file
        with open(path, "rb") as handle:
            self._add(info, handle)
