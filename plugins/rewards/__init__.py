"""rewards package."""
