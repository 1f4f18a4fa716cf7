"""Built-in command `new`: scaffold a kernel project."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..commands import EXIT_OK, Command, CommandError, Context, hookimpl
from ..core.project.scaffold import (
    FAMILIES,
    Catalog,
    ScaffoldError,
    create_project,
    validate_name,
)


def catalog(context: Context) -> Catalog:
    return Catalog.installed(context.pm.hook.workbench_register_scaffolds)


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", nargs="?", help="project name: a known op (rmsnorm, softmax, matmul ...) or any "
                                                "identifier with --template")
    parser.add_argument("--template", "-t", help=f"skeleton: {', '.join(FAMILIES)} (or a known op's name)")
    parser.add_argument("--backward", action="store_true",
                        help="the op's training scaffold: a torch.autograd.Function with forward and backward "
                             "Triton kernels, verified and timed with its gradients (rmsnorm, layernorm, softmax, "
                             "silu_mul, cross_entropy)")
    parser.add_argument("--dir", default="projects", type=Path, help="where to create it (default: ./projects)")
    parser.add_argument("--list", action="store_true", help="list the templates and known ops, then exit")


def _run(args: argparse.Namespace, context: Context) -> int:
    cat = catalog(context)
    if args.list or not args.name:
        if not args.list:
            raise CommandError("a project name is required (try `workbench new --list`)")
        for s in cat.scaffolds:
            kind = "template" if s.template else s.family
            aliases = f" (also: {', '.join(s.aliases)})" if s.aliases else ""
            print(f"{s.name:<14} {kind:<12} {s.summary}{aliases}")
        return EXIT_OK
    try:
        validate_name(args.name)  # before the scaffold is looked up: a refused name is said as such
        scaffold = cat.choose(args.name, args.template, args.backward)
        target = create_project(args.name, args.dir, scaffold)
    except ScaffoldError as exc:
        raise CommandError(str(exc)) from None
    print(f"created {target}/ from the {scaffold.name} scaffold ({scaffold.family})")
    for f in sorted(p.name for p in target.iterdir()):
        print(f"  {f}")
    print(f"next: workbench verify {args.dir / args.name}   or   workbench watch {args.dir / args.name}")
    return EXIT_OK


@hookimpl
def workbench_register_commands(register):
    register(Command(name="new", help="scaffold a kernel project from a template",
                     add_arguments=_add_arguments, run=_run))
