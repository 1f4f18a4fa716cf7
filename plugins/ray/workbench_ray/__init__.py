"""workbench-ray: verify and benchmark over the GPUs of a Ray cluster.

    workbench verify projects/* --cluster ray://head:10001    cases and projects over every GPU of the cluster
    workbench bench projects/rmsnorm --cluster auto           the Ray cluster already running on this machine
    workbench bench projects/rmsnorm --cluster auto --per-gpu-kind   once per kind of GPU, side by side

Registered through the entry point ``[project.entry-points.workbench] ray = "workbench_ray"``. Ray is
imported only when ``--cluster`` is given: other commands load this plugin at no cost.
"""

from workbench import hookimpl

__version__ = "0.1.0"

SERVED = ("verify", "bench")


@hookimpl
def workbench_add_arguments(command, parser):
    if command not in SERVED:
        return
    parser.add_argument("--cluster", metavar="ADDRESS",
                        help="run the workers on a Ray cluster, one GPU each: ray://HOST:PORT (the head's client "
                             "port, 10001 by default) or 'auto' for the cluster running on this machine "
                             "(workbench-ray)")
    if command == "bench":
        parser.add_argument("--per-gpu-kind", action="store_true",
                            help="with --cluster: bench each project once on every kind of GPU in the cluster "
                                 "and show them side by side (workbench-ray)")


@hookimpl
def workbench_make_runner(args, interpret, keep_warm, projects, stages):
    address = getattr(args, "cluster", None)
    if not address:
        if getattr(args, "per_gpu_kind", False):
            from workbench.commands import CommandError

            raise CommandError("--per-gpu-kind needs --cluster: the GPU kinds are those of a Ray cluster")
        return None
    if getattr(args, "per_gpu_kind", False):
        from .matrix import make_matrix_runner

        return make_matrix_runner(address, interpret=interpret)
    from .runner import connect_runner

    return connect_runner(address, interpret=interpret, keep_warm=keep_warm, projects=projects, stages=stages)
