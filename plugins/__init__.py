"""Built-in plugins. Each module here is registered through the ``corebench`` entry-point group,
exactly like a third-party plugin."""
