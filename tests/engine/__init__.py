"""Engine tests: no Django, no network (fake LMs), except those marked slow."""
