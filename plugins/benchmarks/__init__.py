"""Built-in benchmarks."""
