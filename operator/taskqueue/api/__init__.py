"""The TaskQueue API: the pydantic models of a TaskQueue (spec parts, status), manifest
loading, the CRD generated from the models, and the worker settings compiled from a spec.
"""
