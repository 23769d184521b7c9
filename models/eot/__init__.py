"""End-of-turn detection: has the caller finished speaking? (Smart Turn)."""
