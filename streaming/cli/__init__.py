"""The `streaming` command line: convert, inspect, validate, merge-index, lengths, cache, plan."""
