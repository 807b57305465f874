//! Monitor transcripts, grouped by situation.
