"""`python -m streaming.cli ...` runs the same command line as `streaming ...`."""

from streaming.cli.main import main

raise SystemExit(main())
