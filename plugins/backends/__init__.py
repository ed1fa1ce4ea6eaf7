"""Built-in model backends."""
