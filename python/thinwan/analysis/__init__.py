"""Stage 3, analysis: pure functions over records and DataFrames (no I/O): metrics,
delay histograms, run digests, sweep aggregation, the lab's log join, timeout anatomy."""
