"""Normalised values summed: placeholder."""
