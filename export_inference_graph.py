# `python export_inference_graph.py` in a checkout runs the export_inference_graph command:
# slim_deploy/export_inference_graph.py, whose docstring (here too, for absl's --help)
# tells what it does.
from slim_deploy.export_inference_graph import __doc__, run  # noqa: F401

if __name__ == '__main__':
    run()
