"""Procedurally generated data families registered beside the fixed benchmark files (``reasoning_gym``)."""
