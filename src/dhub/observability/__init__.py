"""What dhub tells operators about itself: traces and logs (docs/observability.md)."""
