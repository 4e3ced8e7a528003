"""Adapters into host trainers; the only place that touches verl or verl-agent internals."""
