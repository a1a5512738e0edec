"""The wire format in Redis: key names and their types, the task envelope and entries, the
dead-letter record, stats field names, and the Lua scripts with their one loader.
Pure: what the worker, the operator and the CLI must agree on byte for byte.
"""
