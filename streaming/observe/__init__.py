"""What a run measures and what it will cost: `metrics` (counters and meters a running loader
reports, gathered over ranks) and `forecast` (cache traffic and fill predicted from a plan before
a run)."""
