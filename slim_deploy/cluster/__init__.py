"""Cluster operations.

Public (__all__): tasks (which task of a cluster this process is, from TF_CONFIG or flags;
its server and watchdog), launch (launch_cluster), jobset (Kubernetes JobSet manifests and
their NetworkPolicy), emulated_hosts (hosts in network namespaces, for rehearsals and
failure drills). Internal: watchdog (tasks.watchdog builds it), shape (what every launch
path shares).
"""
__all__ = ['emulated_hosts', 'jobset', 'launch', 'tasks']
