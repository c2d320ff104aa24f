"""Serving SavedModels."""
