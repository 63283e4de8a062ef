"""NASNet-A and PNASNet-5 (TF-Slim's `nets/nasnet`).

`nasnet_utils` holds the cell and operations both share, `nasnet` NASNet-A's
configurations, builders and arg_scopes and the body both build, `pnasnet` PNASNet-5's cell,
configurations, builders and arg_scopes.
"""
