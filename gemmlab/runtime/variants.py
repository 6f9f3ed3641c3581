"""A step's variants as patches (lab/<experiment>/<variant>.patch): each names on its first line the commit of the
kernel it was measured against, and is applied to the kernel's text at that commit (from git), or to the current
kernel where there is no history (an installed package). Chapter 8 shows one (variant_source); the lab's library
(lab/experiments.py) runs and stamps them."""
from __future__ import annotations

import dataclasses
import functools
import re
import subprocess
from pathlib import Path

from . import source
from .source import apply_patch, kernel_path

LAB = source.REPO / "lab"


# A patch's first line: "# measured against <commit> (<kernel file, from the repository root>)". Unified-diff
# readers (git apply, patch, source.apply_patch) skip lines before the "---" header.
MEASURED = re.compile(r"^# measured against ([0-9a-f]{7,40}) \((\S+)\)[ \t]*$")


@dataclasses.dataclass(frozen=True)
class Measured:
    """The kernel a patch was measured against: its commit and its path (relative to the repository)."""
    commit: str
    kernel: str


def measured_against(patch_text: str) -> Measured | None:
    """The commit and kernel file a patch records on its first line, or None if it records none."""
    m = MEASURED.match(patch_text.split("\n", 1)[0])
    return Measured(m.group(1), m.group(2)) if m else None


def git(*args: str) -> str:
    """`git -C <the checkout> ARGS`'s output; a LookupError saying why if there is no history to ask (no git,
    an installed package rather than a checkout, or a shallow clone that lacks the commit)."""
    try:
        top = subprocess.run(["git", "-C", str(source.REPO), "rev-parse", "--show-toplevel"],
                             capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as e:
        raise LookupError(f"git cannot run here ({type(e).__name__}: {e})") from None
    if top.returncode or Path(top.stdout.strip()).resolve() != source.REPO.resolve():
        raise LookupError(f"{source.REPO} is not a git checkout (an installed package has no history)")
    out = subprocess.run(["git", "-C", str(source.REPO), *args], capture_output=True, text=True, timeout=60)
    if out.returncode:
        why = (out.stderr.strip().splitlines() or ["git failed"])[-1]
        raise LookupError(f"git {' '.join(args)}: {why} (a shallow clone lacks older commits: git fetch --unshallow)")
    return out.stdout


@functools.lru_cache(maxsize=64)
def kernel_at(commit: str, kernel: str) -> str:
    """The text of `kernel` (a path from the repository root) at `commit`, from git; a LookupError if the
    history is not there."""
    return git("show", f"{commit}:{kernel}")


def relative(path: Path) -> str:
    try:
        return path.resolve().relative_to(source.REPO.resolve()).as_posix()
    except ValueError:
        return str(path)


def patched(patch: str | Path, kernel: str | None = None) -> str:
    """The source of the variant a patch file describes: the patch applied to the text of the kernel at the
    commit its first line records (`git show COMMIT:KERNEL`), so that editing the kernel since does not
    break it. Without git history (an installed package, a shallow clone) it is applied to the current
    kernel file instead; a ValueError says so if the kernel changed where the patch touches it. A patch that
    records no commit yet (a new variant, before `python lab/run.py FOLDER stamp`) is applied to the current
    kernel file. `kernel`: the current kernel file (relative to kernels/ or the repository) to fall back
    to; by default the one the patch records."""
    patch = Path(patch)
    text = patch.read_text()
    label = relative(patch)
    rec = measured_against(text)
    if rec is None and kernel is None:
        raise ValueError(f"{label} records no '# measured against COMMIT (KERNEL)' line and no kernel was given")
    current = kernel_path(kernel or rec.kernel)
    if rec is None:
        return without_moved_helpers(apply_patch(current.read_text(), text, label=label))
    try:
        base = kernel_at(rec.commit, rec.kernel)
    except LookupError as why:
        try:
            return without_moved_helpers(apply_patch(current.read_text(), text, label=label))
        except ValueError as e:
            raise ValueError(
                f"{label} was measured against {rec.kernel} at commit {rec.commit[:12]}, which cannot be read here "
                f"({why}), so it was applied to the current {relative(current)} instead, and it does not apply "
                f"to that ({e}). Run it from a git clone with the history (not --depth 1).") from None
    return without_moved_helpers(apply_patch(base, text, label=f"{label} (against {rec.kernel} at {rec.commit[:12]})"))


def without_moved_helpers(text: str) -> str:
    """`text` (a kernel at an older commit, or a patch's variant) without the helper definitions that common.cuh
    now holds, the same code (the FP32 steps' edge helpers, the cluster wrappers): kept, they would be defined
    twice. Their comments stay; only the definitions, matched on their code, go."""
    header = kernel_path("common.cuh").read_text()
    for block in re.findall(r"^__device__ __forceinline__[^{;]*\{.*?^\}\n", header, re.M | re.S):
        text = text.replace(block, "")
    return text


def lab_folder(folder: str | Path) -> Path:
    """An experiment's folder of patches and scripts: a path, or a name under lab/."""
    folder = Path(folder)
    return folder if folder.is_absolute() or folder.exists() else LAB / folder


def variant_source(folder: str | Path, step, name: str) -> str | None:
    """A variant's kernel source: <folder>/<name>.patch (a unified diff; the variant keeps the step's kernel
    name and template parameters) applied to the step's kernel as it was at the commit the patch records
    (patched()). None for the step itself (`name` 'step' or '*_base'). `folder` is a path, or a name under
    lab/."""
    if name == "step" or name.endswith("_base"):
        return None
    return patched(lab_folder(folder) / f"{name}.patch", step.file)
