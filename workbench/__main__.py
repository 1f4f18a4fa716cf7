"""`python -m workbench`: the same command line as `workbench`."""

from .cli import main

raise SystemExit(main())
