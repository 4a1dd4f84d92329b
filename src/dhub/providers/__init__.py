"""Model providers (DESIGN.md 6): one interface (``types``), adapters per wire format, the
configured entries and their model catalog, resilience, token estimation and test models."""
