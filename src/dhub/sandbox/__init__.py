"""User functions (DESIGN.md 5): specs read without running them, checks of what goes in and
comes out, and the runner that calls them in isolation."""
