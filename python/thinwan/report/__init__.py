"""Stage 6, reports: terminal tables (:mod:`.text`) and self-contained HTML pages — run,
sweep, timeout anatomy — all drawn with one figure stack (Plotly, :mod:`.figures`)."""
