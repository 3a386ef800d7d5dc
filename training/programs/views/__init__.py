"""Pages of programs: list, create, import, export, their versions."""
