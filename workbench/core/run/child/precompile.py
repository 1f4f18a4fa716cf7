"""Compile the benchmark cases' kernels ahead of the benchmark, without running them.

A cold benchmark spends most of its first seconds in Triton compiling one
specialisation per benchmark shape, one case after another, in the one worker
that times them. While verification is sharded over several workers, each shard
(worker stage "precompile", after its verification cases) compiles its share of
the benchmark cases into the project's Triton cache instead; the benchmark's
worker then loads them from disk. Nothing is launched: `compile_only()` turns
every `kernel[grid](...)` into Triton's own warm-up call (compile, no launch),
and an autotuner compiles each of its configs instead of timing them, so the
picks are still made by the benchmark, alone on the GPU.

It is an optimisation and nothing more: whatever goes wrong here is left for the
benchmark to meet and report.
"""

from __future__ import annotations

from ...events import StageChanged
from ...stage import JobContext
from ...timing.compiled import compile_only
from ..protocol import (
    PRECOMPILING,  # the StageChanged a shard sends when its verification is over
)


def precompile_stage(context: JobContext) -> None:
    """Worker stage "precompile": this shard's share of the benchmark cases, compiled into the cache."""
    context.emit(StageChanged(stage=PRECOMPILING))
    if context.interpret:
        return  # the interpreter compiles nothing
    import torch

    from ...project.contract import select_cases
    from ...stage import shard_of

    km = context.km
    for case in shard_of(select_cases(km.cases, context.job.case_indices, "bench"), context.job.shard):
        try:
            with compile_only():
                km.kernel_fn(*km.get_inputs(**case.params))
        except Exception:  # noqa: BLE001 - the benchmark meets it again and reports it
            pass
        finally:
            torch.cuda.empty_cache()
