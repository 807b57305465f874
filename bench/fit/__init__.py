"""Benchmarks and lab recordings of issue 19 (captures → analysis → fitted models)."""
