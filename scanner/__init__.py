"""memsync's high-confidence secret scanner (built in a later issue)."""
