"""Sliders for any step: pick template parameters, see whether they can run, check and time them.

One mechanism for every chapter: the choices come from the registry, an impossible combination
gets the registry's sentence instead of a traceback, and the report works on both backends.
"""
from __future__ import annotations

from ..runtime import registry
from ..errors import GemmlabError

# Per-SM limits used for occupancy, by compute capability (CUDA C++ Programming Guide, table of
# technical specifications): registers, resident threads, resident blocks, shared memory in bytes.
SM_LIMITS = {75: (65536, 1024, 16, 64 * 1024), 80: (65536, 2048, 32, 164 * 1024),
             86: (65536, 1536, 16, 100 * 1024), 89: (65536, 1536, 24, 100 * 1024),
             90: (65536, 2048, 32, 228 * 1024)}


def blocks_per_sm(registers: int, threads: int, shared_bytes: int, cc: int = 90) -> tuple[int, str]:
    """Resident blocks per SM and the resource that limits them (registers are allocated per warp
    in units of 256, i.e. per thread rounded up to a multiple of 8)."""
    regs_sm, threads_sm, blocks_sm, smem_sm = SM_LIMITS[cc]
    regs_per_warp = -(-registers * 32 // 256) * 256
    warps = -(-threads // 32)
    limits = {"registers": regs_sm // max(regs_per_warp * warps, 1), "threads": threads_sm // threads,
              "blocks": blocks_sm, "shared memory": smem_sm // shared_bytes if shared_bytes else blocks_sm}
    limiter = min(limits, key=limits.get)
    return limits[limiter], limiter


def report(name: str, size: int = 2048, time: bool = True, **params) -> str:
    """The slider's text: can it run (and why not), resources, occupancy, check, and a timing on a GPU."""
    from ..measure import bench, check
    from ..runtime import kernel, nvrtc

    step = registry.get(name)
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
                     f"{blocks} block(s) per SM on sm_{cc} ({blocks * launch.threads // 32} warps, limited by {limiter})")
        if step.min_arch <= 75:
            t4 = inst.resources("sm_75")
            fits = t4.shared_bytes + launch.shared_bytes <= nvrtc.T4_SHARED_LIMIT and not t4.spills
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
    import ipywidgets as widgets

    step = registry.lookup(name)
    controls = {p: widgets.Dropdown(options=list(spec.choices), value=initial.get(p, spec.default), description=p)
                for p, spec in step.params.items()}
    head = []  # controls above the parameters: the fused steps' N
    if registry.is_fused(step):
        from ..runtime import fusion

        n = widgets.SelectionSlider(options=[17, 33, 64, 100, 130], value=size or 64, description="N",
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
