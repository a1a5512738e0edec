"""What the worker and the operator export: the metric registries, the per-slot
tallies behind them, and the one JSON log schema.
"""
