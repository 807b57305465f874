"""Stage 2, records: the one schema of simulated and real runs (tables, atomic writes),
run metadata (git revision, strict JSON) and the emulator's event log reader."""
