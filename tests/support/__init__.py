"""Helpers shared by test modules of several layers (not tests themselves)."""
