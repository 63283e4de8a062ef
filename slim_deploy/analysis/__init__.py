"""Checks of a deployment against the model it deploys.

Public (__all__): equivalence (check: a deployment's first steps against one clone on the
global batch; check_equivalence runs it from the command line).
"""
__all__ = ['equivalence']
