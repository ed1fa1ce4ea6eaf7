"""Built-in agent systems, each in its own folder with its prompt templates."""
