# `python plan_cluster.py` in a checkout runs the plan_cluster command:
# slim_deploy/plan_cluster.py, whose docstring (here too, for absl's --help)
# tells what it does.
from slim_deploy.plan_cluster import __doc__, run  # noqa: F401

if __name__ == '__main__':
    run()
