"""Sliders for any step: pick template parameters, see whether they can run, check and time them.

One mechanism for every chapter: the choices come from the registry, an impossible combination
gets the registry's sentence instead of a traceback, and the report works on both backends.
"""
from __future__ import annotations

from ..runtime import registry
from ..runtime.arch import SM_LIMITS, T4_SHARED_LIMIT, blocks_per_sm  # noqa: F401 (explore.SM_LIMITS)
from ..errors import GemmlabError
from ..measure import bench, check, fusion
from ..runtime import kernel
from ..runtime import optional
widgets = optional.lazy("ipywidgets")  # the live controls only: the command line runs without it


def report(name: str, size: int = 2048, time: bool = True, **params) -> str:
    """The slider's text: can it run (and why not), resources, occupancy, check, and a timing on a GPU."""
    step = registry.lookup(name)
    size = kernel.check_size(size)
    try:
        inst = kernel.instance(name, **params)
    except GemmlabError as e:
        return f"cannot run: {e}"
    lines = [inst.label]
    try:
        cc = 90 if step.min_arch <= 90 else step.min_arch
        res = inst.resources(f"sm_{cc}")
        launch = step.launch(size, size, size, inst.params)
        blocks, limiter = blocks_per_sm(res.registers, launch.threads, res.shared_bytes + launch.shared_bytes, cc)
        lines.append(f"{res}; {launch.threads} threads per block; "
                     f"{blocks} block(s) per SM on sm_{cc} ({blocks * -(-launch.threads // 32)} warps, limited by {limiter})")
        if step.min_arch <= 75:
            t4 = inst.resources("sm_75")
            fits = t4.shared_bytes + launch.shared_bytes <= T4_SHARED_LIMIT and not t4.spills
            lines.append(f"T4 (sm_75): {t4.registers} registers, spills {t4.spill_stores} B: "
                         f"{'fits' if fits else 'does not fit'}")
        k = kernel.step(name, **params)
        lines.append(str(check.verify(k, raise_on_fail=False)))
        if time and k.backend == "gpu":
            lines.append(bench.timing_line(k, size))
    except GemmlabError as e:
        lines.append(f"cannot run: {e}")
    return "\n".join(lines)


def explorer(name: str, size: int | None = None, **initial):
    """ipywidgets controls for every template parameter of step `name`, a GEMM step or a fused one (ipywidgets 7
    and 8). Under them: report() of the GEMM step at size^3 (default 2048), or, for a fused step, a slider over N
    (default 64) and fusion.slider_report (can it run, does it match float64 at N, what was recorded)."""
    step = registry.lookup(name)
    controls = {p: widgets.Dropdown(options=list(spec.choices), value=initial.get(p, spec.default), description=p)
                for p, spec in step.params.items()}
    head = []  # controls above the parameters: N, for a step that offers sizes (StepSpec.slider_sizes: the fused ones)
    if step.slider_sizes:
        n = widgets.SelectionSlider(options=list(step.slider_sizes), value=size or 64, description="N",
                                    continuous_update=False)
        head.append(n)
        text = lambda values: fusion.slider_report(name, n.value, **values)  # noqa: E731
    else:
        text = lambda values: report(name, size=size or 2048, **values)  # noqa: E731
    out = widgets.Output()

    def update(*_):
        out.clear_output()
        with out:
            print(text({p: c.value for p, c in controls.items()}))

    for c in [*head, *controls.values()]:
        c.observe(update, names="value")
    update()
    rows = [widgets.HBox(list(controls.values())[i:i + 4]) for i in range(0, len(controls), 4)]
    return widgets.VBox([*head, *rows, out])
