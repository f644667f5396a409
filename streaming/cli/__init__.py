"""The `streaming` command line: convert, inspect, validate, merge-index, cache, plan."""
